#include "kernels/cpu/elementwise.h"

namespace shardlab::kernels {

void add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void scale(float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void bias_add(float* y, const float* bias, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* yr = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) yr[c] += bias[c];
  }
}

void bias_grad(const float* dy, float* dbias, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* dyr = dy + r * cols;
    for (int64_t c = 0; c < cols; ++c) dbias[c] += dyr[c];
  }
}

}  // namespace shardlab::kernels
