#include "engine/model/sequential.h"

#include <algorithm>

#include "engine/core/error.h"

namespace shardlab {

Layer& Sequential::add(std::string name, std::unique_ptr<Layer> layer) {
  SL_ENFORCE(layer != nullptr, "Sequential '{}': child '{}' is null", label_, name);
  SL_ENFORCE(!name.empty(), "Sequential '{}': child names must not be empty", label_);
  for (const auto& c : children_)
    SL_ENFORCE(c.first != name, "Sequential '{}': two children named '{}'", label_, name);
  children_.emplace_back(std::move(name), std::move(layer));
  const size_t inner = children_.size() - 1;
  acts_.resize(inner);
  grads_.resize(inner);
  return *children_.back().second;
}

Layer& Sequential::child(int i) {
  SL_ENFORCE(i >= 0 && i < size(), "Sequential '{}': child {} out of range ({} children)", label_,
             i, size());
  return *children_[static_cast<size_t>(i)].second;
}

const std::string& Sequential::child_name(int i) const {
  SL_ENFORCE(i >= 0 && i < size(), "Sequential '{}': child {} out of range ({} children)", label_,
             i, size());
  return children_[static_cast<size_t>(i)].first;
}

void Sequential::declare(ParamLayout& layout, const std::string& prefix, int block) {
  for (auto& [name, layer] : children_) layer->declare(layout, prefix + name + ".", block);
}

void Sequential::bind(const ParamBinding& binding) {
  for (auto& c : children_) c.second->bind(binding);
}

void Sequential::init(Rng& rng) {
  for (auto& c : children_) c.second->init(rng);
}

void Sequential::forward(const Tensor& x, Tensor& y) {
  const size_t n = children_.size();
  if (n == 0) {
    y.resize(x.shape(), x.device());
    x.device().copy(x.dspan(), y.dspan());
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const Tensor& in = i == 0 ? x : acts_[i - 1];
    Tensor& out = i + 1 == n ? y : acts_[i];
    children_[i].second->forward(in, out);
  }
}

const Tensor& Sequential::backward_to_first(const Tensor& dy) {
  const size_t n = children_.size();
  for (size_t i = n; i-- > 1;) {
    const Tensor& g = i + 1 == n ? dy : grads_[i];
    children_[i].second->backward(g, grads_[i - 1]);
  }
  return n > 1 ? grads_[0] : dy;
}

void Sequential::backward(const Tensor& dy, Tensor& dx) {
  if (children_.empty()) {
    dx.resize(dy.shape(), dy.device());
    dy.device().copy(dy.dspan(), dx.dspan());
    return;
  }
  children_[0].second->backward(backward_to_first(dy), dx);
}

void Sequential::backward_params_only(const Tensor& dy, Tensor& scratch) {
  if (children_.empty()) return;  // no parameters, and the identity's dx is not wanted
  children_[0].second->backward_params_only(backward_to_first(dy), scratch);
}

}  // namespace shardlab
