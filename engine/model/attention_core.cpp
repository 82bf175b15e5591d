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
  Device& d = qkv.device();
  probs.resize({B, H, T, T}, d);
  att.resize({B, T, C}, d);
  d.causal_attention_forward(dims_of(shape), qkv.dev(), probs.dev(), att.dev());
}

void causal_attention_backward(const AttentionShape& shape, const Tensor& qkv, const Tensor& probs,
                               const Tensor& datt, Tensor& dqkv, Tensor& dscores) {
  const int64_t B = shape.batch, T = shape.steps, H = shape.heads;
  const int64_t C = shape.width(), C3 = 3 * C;
  SL_ENFORCE_T(InternalError, datt.numel() == B * T * C && probs.numel() == B * H * T * T,
               "causal attention: datt {} or probs {} do not match [B={}, T={}, C={}]",
               to_string(datt.shape()), to_string(probs.shape()), B, T, C);
  Device& d = qkv.device();
  dqkv.resize({B, T, C3}, d);
  dscores.resize({T, T}, d);
  d.causal_attention_backward(dims_of(shape), qkv.dev(), probs.dev(), datt.dev(), dqkv.dev(),
                              dscores.dev());
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
  const DevicePtr<float> g = index_ >= 0 ? binding.grad(index_) : DevicePtr<float>();
  grad_ = g ? g + width_ : DevicePtr<float>();
  dev_ = binding.device;
}

void KeyBiasGradKeeper::save() {
  if (!grad_) return;
  saved_.resize({width_}, *dev_);
  dev_->copy(DeviceSpan<const float>(grad_, static_cast<size_t>(width_)), saved_.dspan());
}

void KeyBiasGradKeeper::restore() {
  if (grad_) dev_->copy(saved_.dspan(), DeviceSpan<float>(grad_, static_cast<size_t>(width_)));
}

}  // namespace shardlab
