#include "engine/model/activations.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/model/shape_util.h"
#include "kernels/cpu/activation.h"

namespace shardlab {

void Relu::forward(const Tensor& x, Tensor& y) {
  Device& d = x.device();
  y.resize(x.shape(), d);
  y_.resize(x.shape(), d);
  d.relu_forward(x.dev(), y_.dev(), x.numel());
  d.copy(y_.dspan(), y.dspan());
}

void Relu::backward(const Tensor& dy, Tensor& dx) {
  detail::check_grad(dy, y_.numel(), y_.rank() ? y_.dim(-1) : 0, "Relu");
  Device& d = y_.device();
  dx.resize(y_.shape(), d);
  d.relu_backward(y_.dev(), dy.dev(), dx.dev(), y_.numel());
}

void Gelu::forward(const Tensor& x, Tensor& y) {
  Device& d = x.device();
  y.resize(x.shape(), d);
  x_.resize(x.shape(), d);
  tanh_.resize(x.shape(), d);
  d.copy(x.dspan(), x_.dspan());
  d.gelu_forward(x_.dev(), y.dev(), tanh_.dev(), x_.numel());
}

void Gelu::backward(const Tensor& dy, Tensor& dx) {
  detail::check_grad(dy, x_.numel(), x_.rank() ? x_.dim(-1) : 0, "Gelu");
  Device& d = x_.device();
  dx.resize(x_.shape(), d);
  d.gelu_backward(x_.dev(), tanh_.dev(), dy.dev(), dx.dev(), x_.numel());
}

std::unique_ptr<Layer> make_activation(std::string_view name, std::string_view field) {
  if (name == "relu") return std::make_unique<Relu>();
  if (name == "gelu") return std::make_unique<Gelu>();
  SL_THROW(InvalidArgument, "{}: unknown activation '{}' (expected relu or gelu)", field, name);
}

}  // namespace shardlab
