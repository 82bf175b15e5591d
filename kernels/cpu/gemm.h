// Dense matrix multiply on the CPU through OpenBLAS's cblas, row-major.
#pragma once

#include <cstdint>
#include <string>

namespace shardlab::kernels {

enum class Trans { No, Yes };

// C[m x n] = alpha * op(A) * op(B) + beta * C, all row-major, where op(A) is m x k and op(B) k x n.
// lda/ldb/ldc are the row strides of A, B and C as stored.
void gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// ShardLab runs one BLAS thread per rank (ranks are the parallelism); call once per process
// before any GEMM.
void use_single_blas_thread();
// Runs each GEMM on `n` (>= 1) OpenBLAS threads (engine/launch/compute_threads.h decides n).
void set_blas_threads(int n);
// The number of threads OpenBLAS runs a GEMM on (1 after use_single_blas_thread()).
int blas_threads();

// The BLAS library and the kernel family it chose for this CPU, e.g. "OpenBLAS 0.3.21 ... /
// Haswell".
std::string blas_config();
std::string blas_core_name();

}  // namespace shardlab::kernels
