// TransformerBlock: one pre-LayerNorm GPT block with its two residual connections,
//   h = x + attn(ln1(x)),   y = h + mlp(ln2(h)),   mlp = proj(gelu(fc(.))),
// on [B, T, width] activations. Normalising before each branch (GPT-2's arrangement) leaves the
// residual path an identity, which keeps deep stacks trainable without warm-up tricks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/model/layer.h"
#include "engine/model/layer_norm.h"

namespace shardlab {

class TransformerBlock : public Layer {
 public:
  // The GPT block: CausalSelfAttention and a Sequential "Mlp" of Linear "fc", Gelu "act" and
  // Linear "proj".
  TransformerBlock(int64_t width, int64_t heads, int64_t context, int64_t mlp_ratio);
  // The same residual arrangement around given branches, both mapping [B, T, width] to itself
  // (tensor parallelism passes its own attention and MLP). Parameter names are "ln1.*",
  // "attn." + the attention's names, "ln2.*" and "mlp." + the MLP's names.
  TransformerBlock(int64_t width, std::unique_ptr<Layer> attn, std::unique_ptr<Layer> mlp);

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
  std::unique_ptr<Layer> attn_;
  LayerNorm ln2_;
  std::unique_ptr<Layer> mlp_;
  Tensor n1_, a_, h_, n2_, m_;  // forward intermediates
  Tensor dn_, dbranch_, dh_;    // backward scratch
};

}  // namespace shardlab
