#include "engine/tensor_parallel/tp_attention.h"

#include "engine/core/error.h"

namespace shardlab {
namespace {

// This rank's heads, checked before any member is sized from them.
AttentionShape local_heads(int64_t width, int64_t heads, TpGroup tp) {
  SL_ENFORCE(heads > 0 && width % heads == 0,
             "TensorParallelAttention: {} heads do not divide width {}", heads, width);
  SL_ENFORCE(tp.size > 0 && heads % tp.size == 0,
             "parallel.tp: {} does not divide the attention's {} heads", tp.size, heads);
  AttentionShape s;
  s.heads = heads / tp.size;
  s.head_dim = width / heads;
  return s;
}

}  // namespace

TensorParallelAttention::TensorParallelAttention(int64_t width, int64_t heads, int64_t context,
                                                 TpGroup tp)
    : width_(width),
      context_(context),
      local_(local_heads(width, heads, tp)),
      qkv_(width, 3 * local_.width(), /*bias=*/true, tp),
      proj_(local_.width(), width, /*bias=*/true, tp) {
  SL_ENFORCE(context > 0, "TensorParallelAttention: context must be > 0, got {}", context);
}

void TensorParallelAttention::declare(ParamLayout& layout, const std::string& prefix, int block) {
  qkv_.declare(layout, prefix + "qkv.", block);
  key_bias_.declare(layout, prefix + "qkv.bias", local_.width());
  proj_.declare(layout, prefix + "proj.", block);
}

void TensorParallelAttention::bind(const ParamBinding& binding) {
  qkv_.bind(binding);
  proj_.bind(binding);
  key_bias_.bind(binding);
}

void TensorParallelAttention::forward(const Tensor& x, Tensor& y) {
  SL_ENFORCE(x.rank() == 3 && x.dim(2) == width_,
             "TensorParallelAttention: expected input [B, T, {}], got shape {}", width_,
             to_string(x.shape()));
  SL_ENFORCE(x.dim(1) <= context_, "TensorParallelAttention: sequence length {} exceeds context {}",
             x.dim(1), context_);
  local_.batch = x.dim(0);
  local_.steps = x.dim(1);
  qkv_.forward(x, qkv_out_);  // this rank's [q | k | v] columns, no communication
  causal_attention_forward(local_, qkv_out_, probs_, att_);
  proj_.forward(att_, y);  // all-reduce over tp
}

void TensorParallelAttention::backward(const Tensor& dy, Tensor& dx) {
  proj_.backward(dy, datt_);  // checks dy
  causal_attention_backward(local_, qkv_out_, probs_, datt_, dqkv_, dscores_);
  key_bias_.save();
  qkv_.backward(dqkv_, dx);  // all-reduce over tp
  key_bias_.restore();
}

}  // namespace shardlab
