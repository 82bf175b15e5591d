// cuBLAS, loaded on first use instead of at program start.
//
// Linking libcublas makes every process pay for libcublasLt's static initialisers (about 0.3 s of
// CPU on the build machine, measured with `shardlab help`), whether it ever touches a GPU or not:
// every CLI call, test binary and MPI rank. So nothing links it; the first call of cublas_api()
// opens libcublas.so.<major> (the soname the headers were built for, then the same file in the
// toolkit's library folder the build found) and resolves the few functions ShardLab calls.
//
// Types and constants still come from <cublas_v2.h>; only the calls go through this table.
#pragma once

#include <cublas_v2.h>

namespace shardlab::kernels {

struct CublasApi {
  decltype(&cublasCreate) create;
  decltype(&cublasDestroy) destroy;
  decltype(&cublasSetStream) set_stream;
  decltype(&cublasGetStream) get_stream;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSetAtomicsMode) set_atomics_mode;
  decltype(&cublasSgemm) sgemm;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched;
  decltype(&cublasGetStatusName) status_name;
  decltype(&cublasGetStatusString) status_string;
};

// The table, loaded once (thread-safe). Throws std::runtime_error naming the library and the
// loader's reason when libcublas or one of its functions cannot be found.
const CublasApi& cublas_api();

// "NAME (description)" for a status; "status N" when cuBLAS cannot be loaded.
const char* cublas_status_name(cublasStatus_t status) noexcept;
const char* cublas_status_string(cublasStatus_t status) noexcept;

// cublasDestroy on a handle made by make_cublas_handle(); a null handle is ignored. Never throws.
void destroy_cublas_handle(cublasHandle_t handle) noexcept;

}  // namespace shardlab::kernels
