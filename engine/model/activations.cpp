#include "engine/model/activations.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "engine/core/error.h"
#include "engine/model/shape_util.h"

namespace shardlab {

void Relu::forward(const Tensor& x, Tensor& y) {
  y.resize(x.shape());
  y_.resize(x.shape());
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) y[i] = y_[i] = std::max(x[i], 0.0f);
}

void Relu::backward(const Tensor& dy, Tensor& dx) {
  detail::check_grad(dy, y_.numel(), y_.rank() ? y_.dim(-1) : 0, "Relu");
  dx.resize(y_.shape());
  const int64_t n = y_.numel();
  for (int64_t i = 0; i < n; ++i) dx[i] = y_[i] > 0.0f ? dy[i] : 0.0f;
}

namespace {
constexpr float kGeluC = 0.044715f;
const float kSqrt2OverPi = static_cast<float>(std::sqrt(2.0 / std::numbers::pi));
}  // namespace

void Gelu::forward(const Tensor& x, Tensor& y) {
  y.resize(x.shape());
  x_.resize(x.shape());
  tanh_.resize(x.shape());
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = std::tanh(kSqrt2OverPi * (v + kGeluC * v * v * v));
    x_[i] = v;
    tanh_[i] = t;
    y[i] = 0.5f * v * (1.0f + t);
  }
}

void Gelu::backward(const Tensor& dy, Tensor& dx) {
  detail::check_grad(dy, x_.numel(), x_.rank() ? x_.dim(-1) : 0, "Gelu");
  dx.resize(x_.shape());
  const int64_t n = x_.numel();
  for (int64_t i = 0; i < n; ++i) {
    const float v = x_[i];
    const float t = tanh_[i];
    const float dinner = kSqrt2OverPi * (1.0f + 3.0f * kGeluC * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dinner);
  }
}

std::unique_ptr<Layer> make_activation(std::string_view name, std::string_view field) {
  if (name == "relu") return std::make_unique<Relu>();
  if (name == "gelu") return std::make_unique<Gelu>();
  SL_THROW(InvalidArgument, "{}: unknown activation '{}' (expected relu or gelu)", field, name);
}

}  // namespace shardlab
