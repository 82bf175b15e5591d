// Element-wise activations, forward and backward: ReLU and GELU (tanh approximation). CPU
// reference of kernels/cuda/activation.h. x, y, dy and dx are n floats each; an output may alias
// its own input only where stated.
#pragma once

#include <cstdint>

namespace shardlab::kernels {

// y = max(x, 0). y may alias x.
void relu_forward(const float* x, float* y, int64_t n);
// dx = y > 0 ? dy : 0, with y the forward's output. dx may alias dy.
void relu_backward(const float* y, const float* dy, float* dx, int64_t n);

// GELU, tanh approximation (Hendrycks & Gimpel 2016, eq. for "GELU(x) ~ 0.5x(1+tanh(...))";
// PyTorch's approximate='tanh'), in float:
//   t = tanh(sqrt(2/pi) * (x + 0.044715 * x^3)),  y = 0.5 * x * (1 + t)
// with the tanh argument in float and tanh itself evaluated in double and rounded once (within
// 1 ulp; branch-free, so the loop vectorises; see activation.cpp).
// tanh_out (may be null) receives t for a backward that keeps it.
void gelu_forward(const float* x, float* y, float* tanh_out, int64_t n);
// dx = dy * (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)), with t read from
// tanh_in when it is not null and otherwise recomputed exactly as gelu_forward computes it.
// dx may alias dy.
void gelu_backward(const float* x, const float* tanh_in, const float* dy, float* dx, int64_t n);

}  // namespace shardlab::kernels
