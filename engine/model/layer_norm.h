// LayerNorm over the last dimension: y = (x - mean) / sqrt(var + eps) * weight + bias, with the
// biased (population) variance, as in PyTorch and GPT-2.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/memory.h"
#include "engine/model/layer.h"

namespace shardlab {

class LayerNorm : public Layer {
 public:
  explicit LayerNorm(int64_t dim, float eps = 1e-5f);

  std::string kind() const override { return "LayerNorm"; }
  // Parameters: "weight" [dim] (init 1) and "bias" [dim] (init 0): the identity affine map.
  void declare(ParamLayout& layout, const std::string& prefix, int block) override;
  void bind(const ParamBinding& binding) override;
  void init(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;

  int64_t dim() const { return dim_; }

 private:
  int64_t dim_;
  float eps_;
  int w_index_ = -1, b_index_ = -1;
  Device* dev_ = nullptr;
  DevicePtr<float> w_, dw_, b_, db_;
  Tensor xhat_;  // normalised input, same shape as x
  Tensor rstd_;  // 1 / sqrt(var + eps) per row
};

}  // namespace shardlab
