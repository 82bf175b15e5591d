#include "engine/model/attention_core.h"

#include <algorithm>

#include "engine/core/error.h"
#include "kernels/cpu/attention.h"

namespace shardlab {
namespace {

kernels::AttentionDims dims_of(const AttentionShape& shape) {
  kernels::AttentionDims dims;
  dims.batch = shape.batch;
  dims.steps = shape.steps;
  dims.heads = shape.heads;
  dims.head_dim = shape.head_dim;
  return dims;
}

}  // namespace

void causal_attention_forward(const AttentionShape& shape, const Tensor& qkv, Tensor& probs,
                              Tensor& att) {
  const int64_t B = shape.batch, T = shape.steps, H = shape.heads;
  const int64_t C = shape.width(), C3 = 3 * C;
  SL_ENFORCE_T(InternalError, qkv.numel() == B * T * C3,
               "causal attention: qkv of shape {} is not [{}, {}, {}]", to_string(qkv.shape()), B,
               T, C3);
  probs.resize({B, H, T, T});
  att.resize({B, T, C});
  kernels::causal_attention_forward(dims_of(shape), qkv.data(), probs.data(), att.data());
}

void causal_attention_backward(const AttentionShape& shape, const Tensor& qkv, const Tensor& probs,
                               const Tensor& datt, Tensor& dqkv, Tensor& dscores) {
  const int64_t B = shape.batch, T = shape.steps, H = shape.heads;
  const int64_t C = shape.width(), C3 = 3 * C;
  SL_ENFORCE_T(InternalError, datt.numel() == B * T * C && probs.numel() == B * H * T * T,
               "causal attention: datt {} or probs {} do not match [B={}, T={}, C={}]",
               to_string(datt.shape()), to_string(probs.shape()), B, T, C);
  dqkv.resize({B, T, C3});
  dscores.resize({T, T});
  kernels::causal_attention_backward(dims_of(shape), qkv.data(), probs.data(), datt.data(),
                                     dqkv.data(), dscores.data());
}

void KeyBiasGradKeeper::declare(const ParamLayout& layout, const std::string& bias_name,
                                int64_t width) {
  index_ = layout.index_of(bias_name);
  width_ = width;
  SL_ENFORCE_T(InternalError, layout[index_].numel == 3 * width,
               "{}: {} elements, expected a fused qkv bias of 3 x {}", bias_name,
               layout[index_].numel, width);
}

void KeyBiasGradKeeper::bind(const ParamBinding& binding) {
  float* g = index_ >= 0 ? binding.grad(index_) : nullptr;
  grad_ = g ? g + width_ : nullptr;
}

void KeyBiasGradKeeper::save() {
  if (!grad_) return;
  saved_.resize({width_});
  std::copy_n(grad_, width_, saved_.data());
}

void KeyBiasGradKeeper::restore() {
  if (grad_) std::copy_n(saved_.data(), width_, grad_);
}

}  // namespace shardlab
