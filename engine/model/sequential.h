// Sequential: a Layer made of named child layers applied in order, the usual shape of a block.
// Child i's parameters are named prefix + name_i + "." + its own names (e.g. "blocks.0.fc.weight").
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/layer.h"

namespace shardlab {

class Sequential : public Layer {
 public:
  // `label` is what kind() reports, so a model summary can say "Linear+Relu" rather than
  // "Sequential".
  explicit Sequential(std::string label = "Sequential") : label_(std::move(label)) {}

  // Appends a child. Names must be non-empty and unique within this Sequential.
  Layer& add(std::string name, std::unique_ptr<Layer> layer);
  template <typename L, typename... Args>
  L& emplace(std::string name, Args&&... args) {
    return static_cast<L&>(add(std::move(name), std::make_unique<L>(std::forward<Args>(args)...)));
  }

  int size() const { return static_cast<int>(children_.size()); }
  Layer& child(int i);
  const std::string& child_name(int i) const;

  std::string kind() const override { return label_; }
  void declare(ParamLayout& layout, const std::string& prefix, int block) override;
  void bind(const ParamBinding& binding) override;
  // Children draw from `rng` in order, so adding a child never changes the earlier ones' values.
  void init(Rng& rng) override;
  // An empty Sequential is the identity.
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;
  // The children's backward in reverse, the first child's through its backward_params_only.
  void backward_params_only(const Tensor& dy, Tensor& scratch) override;

 private:
  // Children n-1 .. 1 backward; returns dL/d(output of child 0) (dy itself when n == 1).
  const Tensor& backward_to_first(const Tensor& dy);

  std::string label_;
  std::vector<std::pair<std::string, std::unique_ptr<Layer>>> children_;
  std::vector<Tensor> acts_;   // acts_[i]: output of child i, for i < size() - 1
  std::vector<Tensor> grads_;  // grads_[i]: dL/d(output of child i), for i < size() - 1
};

}  // namespace shardlab
