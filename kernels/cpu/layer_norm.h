// LayerNorm over the last dimension (Ba, Kiros & Hinton 2016), forward and backward. CPU
// reference of kernels/cuda/layer_norm.h. Row-major [rows, dim].
#pragma once

#include <cstdint>

namespace shardlab::kernels {

// Per row: mean and variance in double, two passes (E[x^2] - E[x]^2 cancels badly when
// |mean| >> std); rstd = float(1 / sqrt(var + eps)); xhat = float(x - mean) * rstd;
// y = xhat * weight + bias. Writes y and xhat [rows, dim] and rstd [rows] (kept for backward).
void layer_norm_forward(const float* x, const float* weight, const float* bias, float* y,
                        float* xhat, float* rstd, int64_t rows, int64_t dim, float eps);

// Given dy [rows, dim] and the forward's xhat and rstd: with g = dy * weight,
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))   (row means in float)
// and ADDS dweight[j] += sum_r dy[r, j] * xhat[r, j], dbias[j] += sum_r dy[r, j], the rows added
// in increasing order onto the existing value (so the sums are the same for any implementation
// that keeps that order).
void layer_norm_backward(const float* dy, const float* xhat, const float* rstd, const float* weight,
                         float* dx, float* dweight, float* dbias, int64_t rows, int64_t dim);

}  // namespace shardlab::kernels
