// Linear: y = x W^T + b over the last dimension, with W stored [out, in] (row o holds output unit
// o's weights, as in PyTorch), so a [..., in] input maps to [..., out].
#pragma once

#include <cstdint>
#include <string>

#include "engine/model/layer.h"

namespace shardlab {

class Linear : public Layer {
 public:
  Linear(int64_t in, int64_t out, bool bias = true);

  std::string kind() const override { return "Linear"; }
  // Parameters: "weight" [out, in] and, with bias, "bias" [out].
  void declare(ParamLayout& layout, const std::string& prefix, int block) override;
  void bind(const ParamBinding& binding) override;
  // Weights uniform in [-1/sqrt(in), 1/sqrt(in)): the bound PyTorch's nn.Linear uses by default,
  // which keeps activations at a similar scale across layers. Bias starts at zero, so the initial
  // function depends only on the weights.
  void init(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;
  // dW and db as backward adds them, without the dx GEMM (half of the layer's backward FLOPs).
  void backward_params_only(const Tensor& dy, Tensor& scratch) override;

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  bool has_bias() const { return bias_; }

 private:
  int64_t in_, out_;
  bool bias_;
  int w_index_ = -1, b_index_ = -1;
  Device* dev_ = nullptr;  // where the bound parameters live
  DevicePtr<float> w_, dw_, b_, db_;
  // dW += dy^T x and db += the column sums of dy, for rows rows of the last input; returns rows.
  int64_t add_param_grads(const Tensor& dy);

  Tensor x_;  // the last input, for dW = dy^T x
};

}  // namespace shardlab
