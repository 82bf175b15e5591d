// TensorParallelAttention: causal multi-head self-attention split by heads (Megatron-LM,
// section 3): tp rank r holds heads [r*h/tp, (r+1)*h/tp). Its "qkv" is column-parallel and holds
// the query, key and value columns of its own heads (local layout [q_local | k_local | v_local],
// each C/tp wide, exactly the layout CausalSelfAttention uses with C/tp in place of C), the
// attention itself runs on local heads only with no communication, and "proj" is row-parallel:
// one all-reduce in forward (proj) and one in backward (qkv's input gradient).
//
// Parameters (local shapes, full model's names): "qkv.weight" [3C/tp, C], "qkv.bias" [3C/tp],
// "proj.weight" [C, C/tp], "proj.bias" [C] (replicated). As in CausalSelfAttention, the key part
// of qkv.bias has an exactly zero gradient and backward leaves its accumulated gradient unchanged
// bit for bit.
//
// init() leaves parameters untouched, as in every tensor-parallel layer (tp_linear.h).
#pragma once

#include <cstdint>
#include <string>

#include "engine/model/attention_core.h"
#include "engine/model/layer.h"
#include "engine/tensor_parallel/tp_linear.h"

namespace shardlab {

class TensorParallelAttention : public Layer {
 public:
  // heads must be divisible by tp.size (InvalidArgument naming parallel.tp otherwise).
  TensorParallelAttention(int64_t width, int64_t heads, int64_t context, TpGroup tp);

  std::string kind() const override { return "TensorParallelAttention"; }
  void declare(ParamLayout& layout, const std::string& prefix, int block) override;
  void bind(const ParamBinding& binding) override;
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;

 private:
  int64_t width_, context_;
  AttentionShape local_;  // this rank's heads; batch and steps of the last forward
  ColumnParallelLinear qkv_;
  RowParallelLinear proj_;
  KeyBiasGradKeeper key_bias_;  // the local key part [C/tp, 2C/tp) of qkv.bias
  Tensor qkv_out_;              // [B, T, 3C/tp]
  Tensor probs_;                // [B, heads/tp, T, T]
  Tensor att_;                  // [B, T, C/tp] local heads' outputs
  Tensor datt_, dqkv_, dscores_;
};

}  // namespace shardlab
