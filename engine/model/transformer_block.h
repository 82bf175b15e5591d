// TransformerBlock: one pre-LayerNorm GPT block with its two residual connections,
//   h = x + attn(ln1(x)),   y = h + mlp(ln2(h)),   mlp = proj(gelu(fc(.))),
// on [B, T, width] activations. Normalising before each branch (GPT-2's arrangement) leaves the
// residual path an identity, which keeps deep stacks trainable without warm-up tricks.
#pragma once

#include <cstdint>
#include <string>

#include "engine/model/attention.h"
#include "engine/model/layer.h"
#include "engine/model/layer_norm.h"
#include "engine/model/sequential.h"

namespace shardlab {

class TransformerBlock : public Layer {
 public:
  TransformerBlock(int64_t width, int64_t heads, int64_t context, int64_t mlp_ratio);

  std::string kind() const override { return "TransformerBlock"; }
  // Parameters: "ln1.*", "attn.qkv.*", "attn.proj.*", "ln2.*", "mlp.fc.*" (width -> mlp_ratio *
  // width) and "mlp.proj.*" (back to width); weights and biases each.
  void declare(ParamLayout& layout, const std::string& prefix, int block) override;
  void bind(const ParamBinding& binding) override;
  void init(Rng& rng) override;
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;

 private:
  LayerNorm ln1_;
  CausalSelfAttention attn_;
  LayerNorm ln2_;
  Sequential mlp_;
  Tensor n1_, a_, h_, n2_, m_;  // forward intermediates
  Tensor dn_, dbranch_, dh_;    // backward scratch
};

}  // namespace shardlab
