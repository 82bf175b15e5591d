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
  // Vectorised along the columns, four rows per pass: ((((db + dy0) + dy1) + dy2) + dy3) is the
  // increasing row order, with a quarter of the loads and stores of dbias.
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const float* d0 = dy + r * cols;
    const float* d1 = d0 + cols;
    const float* d2 = d1 + cols;
    const float* d3 = d2 + cols;
    for (int64_t c = 0; c < cols; ++c) dbias[c] = dbias[c] + d0[c] + d1[c] + d2[c] + d3[c];
  }
  for (; r < rows; ++r) {
    const float* dyr = dy + r * cols;
    for (int64_t c = 0; c < cols; ++c) dbias[c] += dyr[c];
  }
}

}  // namespace shardlab::kernels
