#include "engine/model/attention.h"

#include "engine/core/error.h"
#include "engine/model/shape_util.h"

namespace shardlab {

CausalSelfAttention::CausalSelfAttention(int64_t width, int64_t heads, int64_t context)
    : width_(width),
      heads_(heads),
      context_(context),
      head_dim_(heads > 0 ? width / heads : 0),
      qkv_(width, 3 * width),
      proj_(width, width) {
  SL_ENFORCE(heads > 0 && width % heads == 0,
             "CausalSelfAttention: {} heads do not divide width {}", heads, width);
  SL_ENFORCE(context > 0, "CausalSelfAttention: context must be > 0, got {}", context);
}

void CausalSelfAttention::declare(ParamLayout& layout, const std::string& prefix, int block) {
  qkv_.declare(layout, prefix + "qkv.", block);
  key_bias_.declare(layout, prefix + "qkv.bias", width_);
  proj_.declare(layout, prefix + "proj.", block);
}

void CausalSelfAttention::bind(const ParamBinding& binding) {
  qkv_.bind(binding);
  proj_.bind(binding);
  key_bias_.bind(binding);
}

void CausalSelfAttention::init(Rng& rng) {
  qkv_.init(rng);
  proj_.init(rng);
}

void CausalSelfAttention::forward(const Tensor& x, Tensor& y) {
  SL_ENFORCE(x.rank() == 3 && x.dim(2) == width_,
             "CausalSelfAttention: expected input [B, T, {}], got shape {}", width_,
             to_string(x.shape()));
  SL_ENFORCE(x.dim(1) <= context_, "CausalSelfAttention: sequence length {} exceeds context {}",
             x.dim(1), context_);
  batch_ = x.dim(0);
  steps_ = x.dim(1);
  qkv_.forward(x, qkv_out_);
  causal_attention_forward({batch_, steps_, heads_, head_dim_}, qkv_out_, probs_, att_);
  proj_.forward(att_, y);
}

void CausalSelfAttention::backward(const Tensor& dy, Tensor& dx) {
  detail::check_grad(dy, batch_ * steps_ * width_, width_, "CausalSelfAttention");
  proj_.backward(dy, datt_);
  causal_attention_backward({batch_, steps_, heads_, head_dim_}, qkv_out_, probs_, datt_, dqkv_,
                            dscores_);
  key_bias_.save();
  qkv_.backward(dqkv_, dx);
  key_bias_.restore();
}

}  // namespace shardlab
