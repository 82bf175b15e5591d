#include "kernels/cpu/layer_norm.h"

#include <cmath>

namespace shardlab::kernels {

void layer_norm_forward(const float* x, const float* weight, const float* bias, float* y,
                        float* xhat, float* rstd, int64_t rows, int64_t dim, float eps) {
  const double inv_dim = 1.0 / static_cast<double>(dim);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    // Two passes in double: the one-pass E[x^2] - E[x]^2 cancels badly when |mean| >> std.
    double mean = 0;
    for (int64_t j = 0; j < dim; ++j) mean += xr[j];
    mean *= inv_dim;
    double var = 0;
    for (int64_t j = 0; j < dim; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    var *= inv_dim;
    const float rs = static_cast<float>(1.0 / std::sqrt(var + eps));
    rstd[r] = rs;
    float* hr = xhat + r * dim;
    float* yr = y + r * dim;
    for (int64_t j = 0; j < dim; ++j) {
      const float h = static_cast<float>(xr[j] - mean) * rs;
      hr[j] = h;
      yr[j] = h * weight[j] + bias[j];
    }
  }
}

void layer_norm_backward(const float* dy, const float* xhat, const float* rstd, const float* weight,
                         float* dx, float* dweight, float* dbias, int64_t rows, int64_t dim) {
  const float inv_dim = 1.0f / static_cast<float>(dim);
  for (int64_t r = 0; r < rows; ++r) {
    const float* dyr = dy + r * dim;
    const float* hr = xhat + r * dim;
    float* dxr = dx + r * dim;
    // With g = dy * weight: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
    float sum_g = 0, sum_gh = 0;
    for (int64_t j = 0; j < dim; ++j) {
      const float g = dyr[j] * weight[j];
      sum_g += g;
      sum_gh += g * hr[j];
      dweight[j] += dyr[j] * hr[j];
      dbias[j] += dyr[j];
    }
    const float mean_g = sum_g * inv_dim, mean_gh = sum_gh * inv_dim;
    const float rs = rstd[r];
    for (int64_t j = 0; j < dim; ++j) dxr[j] = rs * (dyr[j] * weight[j] - mean_g - hr[j] * mean_gh);
  }
}

}  // namespace shardlab::kernels
