#include "engine/model/transformer_block.h"

#include "engine/core/error.h"
#include "engine/model/activations.h"
#include "engine/model/attention.h"
#include "engine/model/linear.h"
#include "engine/model/sequential.h"
#include "kernels/cpu/elementwise.h"

namespace shardlab {
namespace {

// out = a + b, element for element, shaped like b (the branch output, which has the shape of the
// block input even when a gradient arrives with its leading dimensions regrouped).
void add_into(const Tensor& a, const Tensor& b, Tensor& out) {
  SL_ENFORCE_T(InternalError, a.numel() == b.numel(), "residual add of {} and {}",
               to_string(a.shape()), to_string(b.shape()));
  out.resize(b.shape(), b.device());
  b.device().add(a.dev(), b.dev(), out.dev(), a.numel());
}

std::unique_ptr<Layer> make_mlp(int64_t width, int64_t mlp_ratio) {
  SL_ENFORCE(mlp_ratio > 0, "TransformerBlock: mlp_ratio must be > 0, got {}", mlp_ratio);
  auto mlp = std::make_unique<Sequential>("Mlp");
  mlp->emplace<Linear>("fc", width, mlp_ratio * width);
  mlp->emplace<Gelu>("act");
  mlp->emplace<Linear>("proj", mlp_ratio * width, width);
  return mlp;
}

}  // namespace

TransformerBlock::TransformerBlock(int64_t width, int64_t heads, int64_t context, int64_t mlp_ratio)
    : TransformerBlock(width, std::make_unique<CausalSelfAttention>(width, heads, context),
                       make_mlp(width, mlp_ratio)) {}

TransformerBlock::TransformerBlock(int64_t width, std::unique_ptr<Layer> attn,
                                   std::unique_ptr<Layer> mlp)
    : ln1_(width), attn_(std::move(attn)), ln2_(width), mlp_(std::move(mlp)) {
  SL_ENFORCE(attn_ != nullptr && mlp_ != nullptr, "TransformerBlock: null attention or MLP");
}

void TransformerBlock::declare(ParamLayout& layout, const std::string& prefix, int block) {
  ln1_.declare(layout, prefix + "ln1.", block);
  attn_->declare(layout, prefix + "attn.", block);
  ln2_.declare(layout, prefix + "ln2.", block);
  mlp_->declare(layout, prefix + "mlp.", block);
}

void TransformerBlock::bind(const ParamBinding& binding) {
  ln1_.bind(binding);
  attn_->bind(binding);
  ln2_.bind(binding);
  mlp_->bind(binding);
}

void TransformerBlock::init(Rng& rng) {
  ln1_.init(rng);
  attn_->init(rng);
  ln2_.init(rng);
  mlp_->init(rng);
}

void TransformerBlock::forward(const Tensor& x, Tensor& y) {
  ln1_.forward(x, n1_);
  attn_->forward(n1_, a_);
  add_into(x, a_, h_);
  ln2_.forward(h_, n2_);
  mlp_->forward(n2_, m_);
  add_into(h_, m_, y);
}

void TransformerBlock::backward(const Tensor& dy, Tensor& dx) {
  // y = h + mlp(ln2(h)): dL/dh = dy + (the MLP branch's gradient).
  mlp_->backward(dy, dbranch_);
  ln2_.backward(dbranch_, dn_);
  add_into(dy, dn_, dh_);
  // h = x + attn(ln1(x)): dL/dx = dh + (the attention branch's gradient).
  attn_->backward(dh_, dbranch_);
  ln1_.backward(dbranch_, dn_);
  add_into(dh_, dn_, dx);
}

}  // namespace shardlab
