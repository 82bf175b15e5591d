// Row-major GEMM over cuBLAS's column-major one. A row-major X with row stride ldx is, read as
// column-major, X^T with leading dimension ldx; so the row-major C = op(A) op(B) is computed as
// the column-major C^T = op(B)^T op(A)^T: B first, then A, with m and n swapped, and each
// operand's Trans passed unchanged (no copies).
//
// cuBLAS takes int sizes and leading dimensions (the strides of the batched call are 64-bit):
// larger values are rejected here rather than truncated.
#include <climits>
#include <stdexcept>
#include <string>

#include "kernels/cuda/gemm.h"

#include "kernels/cuda/cublas_api.h"

namespace shardlab::kernels {

namespace {

[[noreturn]] void fail(const char* call, const std::string& what) {
  throw std::runtime_error(std::string(call) + ": " + what);
}

void check_status(const char* call, cublasStatus_t s) {
  if (s != CUBLAS_STATUS_SUCCESS)
    fail(call, std::string(cublas_status_name(s)) + " (" + cublas_status_string(s) + ")");
}

int to_int(const char* call, const char* name, int64_t v) {
  if (v < 0 || v > INT_MAX)
    fail(call, std::string(name) + " = " + std::to_string(v) + " is outside [0, INT_MAX]");
  return static_cast<int>(v);
}

cublasOperation_t op(Trans t) {
  return t == Trans::Yes ? CUBLAS_OP_T : CUBLAS_OP_N;
}

}  // namespace

void gemm_cuda(cublasHandle_t handle, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k,
               float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
               float* c, int64_t ldc) {
  constexpr const char* kCall = "gemm_cuda: cublasSgemm";
  const int im = to_int(kCall, "m", m), in = to_int(kCall, "n", n), ik = to_int(kCall, "k", k);
  const int ilda = to_int(kCall, "lda", lda), ildb = to_int(kCall, "ldb", ldb),
            ildc = to_int(kCall, "ldc", ldc);
  if (m == 0 || n == 0) return;  // as the CPU: nothing to write
  check_status(kCall, cublas_api().sgemm(handle, op(tb), op(ta), in, im, ik, &alpha, b, ildb, a,
                                         ilda, &beta, c, ildc));
}

void gemm_strided_batched_cuda(cublasHandle_t handle, Trans ta, Trans tb, int64_t m, int64_t n,
                               int64_t k, float alpha, const float* a, int64_t lda,
                               int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b,
                               float beta, float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  constexpr const char* kCall = "gemm_strided_batched_cuda: cublasSgemmStridedBatched";
  const int im = to_int(kCall, "m", m), in = to_int(kCall, "n", n), ik = to_int(kCall, "k", k);
  const int ilda = to_int(kCall, "lda", lda), ildb = to_int(kCall, "ldb", ldb),
            ildc = to_int(kCall, "ldc", ldc);
  const int ibatch = to_int(kCall, "batch", batch);
  if (m == 0 || n == 0 || batch == 0) return;
  check_status(
      kCall, cublas_api().sgemm_strided_batched(handle, op(tb), op(ta), in, im, ik, &alpha, b, ildb,
                                                static_cast<long long>(stride_b), a, ilda,
                                                static_cast<long long>(stride_a), &beta, c, ildc,
                                                static_cast<long long>(stride_c), ibatch));
}

cublasHandle_t make_cublas_handle(cudaStream_t stream) {
  cublasHandle_t h = nullptr;
  check_status("make_cublas_handle: cublasCreate", cublas_api().create(&h));
  try {
    check_status("make_cublas_handle: cublasSetStream", cublas_api().set_stream(h, stream));
    // CUBLAS_PEDANTIC_MATH rather than CUBLAS_DEFAULT_MATH: both exclude TF32 tensor ops, but
    // pedantic also guarantees standard FP32 arithmetic whatever the environment says (no
    // BF16x9 emulation, no reduced-precision reductions, which default math may be switched to
    // by cuBLAS environment variables such as CUBLAS_EMULATE_SINGLE_PRECISION).
    check_status("make_cublas_handle: cublasSetMathMode",
                 cublas_api().set_math_mode(h, CUBLAS_PEDANTIC_MATH));
    // The default, made explicit: no atomics, so every run gives the same bits (cuBLAS guarantees
    // that on one GPU model with one stream per handle).
    check_status("make_cublas_handle: cublasSetAtomicsMode",
                 cublas_api().set_atomics_mode(h, CUBLAS_ATOMICS_NOT_ALLOWED));
  } catch (...) {
    destroy_cublas_handle(h);
    throw;
  }
  return h;
}

}  // namespace shardlab::kernels
