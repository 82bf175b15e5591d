// Causal multi-head softmax attention over a fused qkv buffer, forward and backward. CPU
// reference of kernels/cuda/attention.h (GEMMs through kernels/cpu/gemm.h).
//
// qkv is [B, T, 3C]: queries in columns [0, C), keys in [C, 2C), values in [2C, 3C); head h owns
// columns [h*d, (h+1)*d) of each part (C = heads * d). Each head computes
// softmax(q k^T / sqrt(d)) v, position t attending to positions <= t (Vaswani et al. 2017), and
// the heads' outputs are concatenated into att [B, T, C].
#pragma once

#include <cstdint>

namespace shardlab::kernels {

struct AttentionDims {
  int64_t batch = 0;                                  // B
  int64_t steps = 0;                                  // T
  int64_t heads = 0;                                  // heads held in the qkv buffer
  int64_t head_dim = 0;                               // d
  int64_t width() const { return heads * head_dim; }  // C
};

// qkv [B, T, 3C] -> probs [B, heads, T, T] (attention weights, exactly zero above the diagonal)
// and att [B, T, C]. Per row of scores: max, exp(s - max), sum and 1/sum in float, in column
// order.
void causal_attention_forward(const AttentionDims& dims, const float* qkv, float* probs,
                              float* att);

// Given datt [B, T, C] and the forward's qkv and probs, writes dqkv [B, T, 3C].
// dscores: scratch of T*T floats.
void causal_attention_backward(const AttentionDims& dims, const float* qkv, const float* probs,
                               const float* datt, float* dqkv, float* dscores);

}  // namespace shardlab::kernels
