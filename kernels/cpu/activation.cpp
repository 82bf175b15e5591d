#include "kernels/cpu/activation.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace shardlab::kernels {
namespace {

constexpr float kGeluC = 0.044715f;
const float kSqrt2OverPi = static_cast<float>(std::sqrt(2.0 / std::numbers::pi));

// tanh(sqrt(2/pi) * (x + 0.044715 x^3)), in float.
inline float gelu_tanh(float v) {
  return std::tanh(kSqrt2OverPi * (v + kGeluC * v * v * v));
}

}  // namespace

void relu_forward(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::max(x[i], 0.0f);
}

void relu_backward(const float* y, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

void gelu_forward(const float* x, float* y, float* tanh_out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = gelu_tanh(v);
    if (tanh_out) tanh_out[i] = t;
    y[i] = 0.5f * v * (1.0f + t);
  }
}

void gelu_backward(const float* x, const float* tanh_in, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = tanh_in ? tanh_in[i] : gelu_tanh(v);
    const float dinner = kSqrt2OverPi * (1.0f + 3.0f * kGeluC * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dinner);
  }
}

}  // namespace shardlab::kernels
