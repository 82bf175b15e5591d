// CausalSelfAttention: multi-head self-attention where position t attends to positions <= t.
//
// Input [B, T, C] with T <= context. A fused Linear(C, 3C) ("qkv") gives queries, keys and values
// (columns [0, C), [C, 2C), [2C, 3C); head h owns columns [h*d, (h+1)*d) of each, d = C / heads);
// each head computes softmax(q k^T / sqrt(d)) v under the causal mask, the heads' outputs are
// concatenated back to [B, T, C] and a Linear(C, C) ("proj") mixes them. The attention itself is
// causal_attention_forward/backward (attention_core.h).
#pragma once

#include <cstdint>
#include <string>

#include "engine/model/attention_core.h"
#include "engine/model/layer.h"
#include "engine/model/linear.h"

namespace shardlab {

class CausalSelfAttention : public Layer {
 public:
  CausalSelfAttention(int64_t width, int64_t heads, int64_t context);

  std::string kind() const override { return "CausalSelfAttention"; }
  // Parameters: "qkv.weight" [3C, C], "qkv.bias" [3C], "proj.weight" [C, C], "proj.bias" [C].
  // The key part of qkv.bias (elements [C, 2C)) adds q.b to every score of a query row, which
  // softmax ignores: its gradient is exactly zero, and backward adds exactly zero rather than
  // the rounding noise the sum would give (Adam would turn that noise into lr-sized steps, so two
  // runs adding in a different order, sharded and single, would drift apart).
  void declare(ParamLayout& layout, const std::string& prefix, int block) override;
  void bind(const ParamBinding& binding) override;
  void init(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;

  int64_t width() const { return width_; }
  int64_t heads() const { return heads_; }
  int64_t context() const { return context_; }

 private:
  int64_t width_, heads_, context_, head_dim_;
  Linear qkv_, proj_;
  KeyBiasGradKeeper key_bias_;     // keeps qkv.bias's key-part gradient across backward
  int64_t batch_ = 0, steps_ = 0;  // B and T of the last forward
  Tensor qkv_out_;                 // [B, T, 3C]
  Tensor probs_;                   // [B, heads, T, T] attention weights; zero above the diagonal
  Tensor att_;                     // [B, T, C] heads' outputs, concatenated
  // Backward scratch, kept so steady-state steps do not allocate.
  Tensor datt_, dqkv_, dscores_;
};

}  // namespace shardlab
