#include "kernels/cpu/layer_norm.h"

#include <cmath>

namespace shardlab::kernels {

namespace {

// Rows are handled kRowGroup at a time where they can be: each row's sums are still added in
// the documented order (left to right), one chain per row, but the chains of the group are
// independent, so the CPU overlaps their add latencies instead of waiting on one chain (the same
// bits as one row at a time, several times faster for the short rows of a transformer).
constexpr int64_t kRowGroup = 4;

// Forward of rows [r0, r0 + G).
template <int64_t G>
void forward_rows(const float* x, const float* weight, const float* bias, float* y, float* xhat,
                  float* rstd, int64_t r0, int64_t dim, float eps) {
  const double inv_dim = 1.0 / static_cast<double>(dim);
  const float* xr[G];
  for (int64_t g = 0; g < G; ++g) xr[g] = x + (r0 + g) * dim;
  // Two passes in double: the one-pass E[x^2] - E[x]^2 cancels badly when |mean| >> std.
  double mean[G] = {};
  for (int64_t j = 0; j < dim; ++j)
    for (int64_t g = 0; g < G; ++g) mean[g] += xr[g][j];
  for (int64_t g = 0; g < G; ++g) mean[g] *= inv_dim;
  double var[G] = {};
  for (int64_t j = 0; j < dim; ++j)
    for (int64_t g = 0; g < G; ++g) var[g] += (xr[g][j] - mean[g]) * (xr[g][j] - mean[g]);
  for (int64_t g = 0; g < G; ++g) {
    const double v = var[g] * inv_dim;
    const float rs = static_cast<float>(1.0 / std::sqrt(v + eps));
    rstd[r0 + g] = rs;
    const double m = mean[g];
    const float* xg = xr[g];
    float* hr = xhat + (r0 + g) * dim;
    float* yr = y + (r0 + g) * dim;
    for (int64_t j = 0; j < dim; ++j) {
      const float h = static_cast<float>(xg[j] - m) * rs;
      hr[j] = h;
      yr[j] = h * weight[j] + bias[j];
    }
  }
}

// Backward of rows [r0, r0 + G): dx, and the rows' terms of dweight and dbias added in row order.
template <int64_t G>
void backward_rows(const float* dy, const float* xhat, const float* rstd, const float* weight,
                   float* dx, float* dweight, float* dbias, int64_t r0, int64_t dim) {
  const float inv_dim = 1.0f / static_cast<float>(dim);
  // With g = dy * weight: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)); both sums left to
  // right in float.
  float sum_g[G] = {}, sum_gh[G] = {};
  for (int64_t j = 0; j < dim; ++j) {
    for (int64_t g = 0; g < G; ++g) {
      const float gj = dy[(r0 + g) * dim + j] * weight[j];
      sum_g[g] += gj;
      sum_gh[g] += gj * xhat[(r0 + g) * dim + j];
    }
  }
  for (int64_t g = 0; g < G; ++g) {
    const int64_t r = r0 + g;
    const float* dyr = dy + r * dim;
    const float* hr = xhat + r * dim;
    float* dxr = dx + r * dim;
    // Element-wise over the columns (vectorised): this row's terms onto dweight and dbias, the
    // rows in increasing order, then dx.
    for (int64_t j = 0; j < dim; ++j) {
      dweight[j] += dyr[j] * hr[j];
      dbias[j] += dyr[j];
    }
    const float mean_g = sum_g[g] * inv_dim, mean_gh = sum_gh[g] * inv_dim;
    const float rs = rstd[r];
    for (int64_t j = 0; j < dim; ++j) dxr[j] = rs * (dyr[j] * weight[j] - mean_g - hr[j] * mean_gh);
  }
}

}  // namespace

void layer_norm_forward(const float* x, const float* weight, const float* bias, float* y,
                        float* xhat, float* rstd, int64_t rows, int64_t dim, float eps) {
  int64_t r = 0;
  for (; r + kRowGroup <= rows; r += kRowGroup)
    forward_rows<kRowGroup>(x, weight, bias, y, xhat, rstd, r, dim, eps);
  for (; r < rows; ++r) forward_rows<1>(x, weight, bias, y, xhat, rstd, r, dim, eps);
}

void layer_norm_backward(const float* dy, const float* xhat, const float* rstd, const float* weight,
                         float* dx, float* dweight, float* dbias, int64_t rows, int64_t dim) {
  int64_t r = 0;
  for (; r + kRowGroup <= rows; r += kRowGroup)
    backward_rows<kRowGroup>(dy, xhat, rstd, weight, dx, dweight, dbias, r, dim);
  for (; r < rows; ++r) backward_rows<1>(dy, xhat, rstd, weight, dx, dweight, dbias, r, dim);
}

}  // namespace shardlab::kernels
