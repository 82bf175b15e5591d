#include "engine/model/activations.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/model/shape_util.h"
#include "kernels/cpu/activation.h"

namespace shardlab {

void Relu::forward(const Tensor& x, Tensor& y) {
  y.resize(x.shape());
  y_.resize(x.shape());
  kernels::relu_forward(x.data(), y_.data(), x.numel());
  std::copy_n(y_.data(), y_.numel(), y.data());
}

void Relu::backward(const Tensor& dy, Tensor& dx) {
  detail::check_grad(dy, y_.numel(), y_.rank() ? y_.dim(-1) : 0, "Relu");
  dx.resize(y_.shape());
  kernels::relu_backward(y_.data(), dy.data(), dx.data(), y_.numel());
}

void Gelu::forward(const Tensor& x, Tensor& y) {
  y.resize(x.shape());
  x_.resize(x.shape());
  tanh_.resize(x.shape());
  std::copy_n(x.data(), x.numel(), x_.data());
  kernels::gelu_forward(x_.data(), y.data(), tanh_.data(), x_.numel());
}

void Gelu::backward(const Tensor& dy, Tensor& dx) {
  detail::check_grad(dy, x_.numel(), x_.rank() ? x_.dim(-1) : 0, "Gelu");
  dx.resize(x_.shape());
  kernels::gelu_backward(x_.data(), tanh_.data(), dy.data(), dx.data(), x_.numel());
}

std::unique_ptr<Layer> make_activation(std::string_view name, std::string_view field) {
  if (name == "relu") return std::make_unique<Relu>();
  if (name == "gelu") return std::make_unique<Gelu>();
  SL_THROW(InvalidArgument, "{}: unknown activation '{}' (expected relu or gelu)", field, name);
}

}  // namespace shardlab
