// The causal softmax attention at the heart of CausalSelfAttention, over a fused qkv buffer, shared
// with the tensor-parallel attention (engine/tensor_parallel/tp_attention.h), which runs it on its
// own heads only.
//
// qkv is [B, T, 3C]: queries in columns [0, C), keys in [C, 2C), values in [2C, 3C), and head h
// owns columns [h*d, (h+1)*d) of each part (C = heads * d). Each head computes
// softmax(q k^T / sqrt(d)) v, position t attending to positions <= t, and the heads' outputs are
// concatenated into att [B, T, C].
#pragma once

#include <cstdint>
#include <string>

#include "engine/core/param_layout.h"
#include "engine/device/tensor.h"

namespace shardlab {

struct AttentionShape {
  int64_t batch = 0;                                  // B
  int64_t steps = 0;                                  // T
  int64_t heads = 0;                                  // heads held in the qkv buffer
  int64_t head_dim = 0;                               // d
  int64_t width() const { return heads * head_dim; }  // C, the width of each of q, k and v
};

// qkv [B, T, 3C] -> probs [B, heads, T, T] (the attention weights, zero above the diagonal) and
// att [B, T, C]. probs and att are resized.
void causal_attention_forward(const AttentionShape& shape, const Tensor& qkv, Tensor& probs,
                              Tensor& att);

// Given datt = dL/datt [B, T, C] of the forward that produced qkv and probs, writes dqkv
// [B, T, 3C] (resized). dscores is [T, T] scratch, kept by the caller so steps do not allocate.
void causal_attention_backward(const AttentionShape& shape, const Tensor& qkv, const Tensor& probs,
                               const Tensor& datt, Tensor& dqkv, Tensor& dscores);

// The key part of a fused qkv bias adds q.b_k to every score of a query row, which softmax
// ignores: its gradient is exactly zero. Summing it anyway gives rounding noise, which Adam turns
// into lr-sized steps (so runs adding in a different order, sharded and single, would drift
// apart). This keeps that part of the accumulated gradient bit for bit across the qkv Linear's
// backward: save() before it, restore() after.
class KeyBiasGradKeeper {
 public:
  // `bias_name` is the fused qkv bias in `layout`, [3C] with its key part at [C, 2C).
  void declare(const ParamLayout& layout, const std::string& bias_name, int64_t width);
  // Finds the key part's gradient (none when bound without gradients).
  void bind(const ParamBinding& binding);
  void save();
  void restore();

 private:
  int index_ = -1;
  int64_t width_ = 0;
  DevicePtr<float> grad_;  // the key part's gradient, or null
  Device* dev_ = nullptr;
  Tensor saved_;
};

}  // namespace shardlab
