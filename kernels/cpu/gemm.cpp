#include "kernels/cpu/gemm.h"

#include <cblas.h>

namespace shardlab::kernels {

void gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, ta == Trans::Yes ? CblasTrans : CblasNoTrans,
              tb == Trans::Yes ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda),
              b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

void use_single_blas_thread() {
  openblas_set_num_threads(1);
}

void set_blas_threads(int n) {
  openblas_set_num_threads(n < 1 ? 1 : n);
}

int blas_threads() {
  return openblas_get_num_threads();
}

std::string blas_config() {
  return openblas_get_config();
}
std::string blas_core_name() {
  return openblas_get_corename();
}

}  // namespace shardlab::kernels
