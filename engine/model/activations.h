// Element-wise activations (any shape, no parameters).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "engine/model/layer.h"

namespace shardlab {

// y = max(0, x). The derivative at exactly 0 is taken as 0.
class Relu : public Layer {
 public:
  std::string kind() const override { return "Relu"; }
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;

 private:
  Tensor y_;  // the output: its sign is the mask backward needs
};

// GELU with GPT-2's tanh approximation:
//   y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
class Gelu : public Layer {
 public:
  std::string kind() const override { return "Gelu"; }
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;

 private:
  Tensor x_;
  Tensor tanh_;  // the tanh from forward, which backward needs too (it dominates the cost)
};

// "relu" or "gelu"; anything else throws InvalidArgument naming `field` (e.g. "model.activation").
std::unique_ptr<Layer> make_activation(std::string_view name,
                                       std::string_view field = "activation");

}  // namespace shardlab
