#include "engine/model/attention.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"
#include "engine/model/shape_util.h"
#include "kernels/cpu/gemm.h"

namespace shardlab {

using kernels::gemm;
using kernels::Trans;

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
  key_bias_index_ = layout.index_of(prefix + "qkv.bias");
  proj_.declare(layout, prefix + "proj.", block);
}

void CausalSelfAttention::bind(const ParamBinding& binding) {
  qkv_.bind(binding);
  proj_.bind(binding);
  float* g = key_bias_index_ >= 0 ? binding.grad(key_bias_index_) : nullptr;
  key_bias_grad_ = g ? g + width_ : nullptr;
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
  const int64_t B = x.dim(0), T = x.dim(1), C = width_, C3 = 3 * width_, D = head_dim_;
  batch_ = B;
  steps_ = T;
  qkv_.forward(x, qkv_out_);
  probs_.resize({B, heads_, T, T});
  att_.resize({B, T, C});
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < heads_; ++h) {
      const float* q = qkv_out_.data() + b * T * C3 + h * D;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* p = probs_.data() + (b * heads_ + h) * T * T;
      // Scores for all (i, j); the part above the diagonal is overwritten by the mask below.
      gemm(Trans::No, Trans::Yes, T, T, D, scale, q, C3, k, C3, 0.0f, p, T);
      for (int64_t i = 0; i < T; ++i) {
        float* row = p + i * T;
        float mx = row[0];
        for (int64_t j = 1; j <= i; ++j) mx = std::max(mx, row[j]);
        float sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          row[j] = std::exp(row[j] - mx);
          sum += row[j];
        }
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j <= i; ++j) row[j] *= inv;
        for (int64_t j = i + 1; j < T; ++j) row[j] = 0.0f;
      }
      // out = P v, written into this head's columns of att_.
      gemm(Trans::No, Trans::No, T, D, T, 1.0f, p, T, v, C3, 0.0f, att_.data() + b * T * C + h * D,
           C);
    }
  }
  proj_.forward(att_, y);
}

void CausalSelfAttention::backward(const Tensor& dy, Tensor& dx) {
  const int64_t B = batch_, T = steps_, C = width_, C3 = 3 * width_, D = head_dim_;
  detail::check_grad(dy, B * T * C, C, "CausalSelfAttention");
  proj_.backward(dy, datt_);
  dqkv_.resize({B, T, C3});
  dscores_.resize({T, T});
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  float* ds = dscores_.data();
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < heads_; ++h) {
      const float* q = qkv_out_.data() + b * T * C3 + h * D;
      const float* k = q + C;
      const float* v = q + 2 * C;
      const float* p = probs_.data() + (b * heads_ + h) * T * T;
      const float* dout = datt_.data() + b * T * C + h * D;
      float* dq = dqkv_.data() + b * T * C3 + h * D;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      // dP = dout v^T and dv = P^T dout.
      gemm(Trans::No, Trans::Yes, T, T, D, 1.0f, dout, C, v, C3, 0.0f, ds, T);
      gemm(Trans::Yes, Trans::No, T, D, T, 1.0f, p, T, dout, C, 0.0f, dv, C3);
      // Softmax backward per row: dS = P * (dP - sum_j dP_j P_j). Masked entries have P = 0, so
      // they get no gradient.
      for (int64_t i = 0; i < T; ++i) {
        const float* prow = p + i * T;
        float* drow = ds + i * T;
        float dot = 0;
        for (int64_t j = 0; j <= i; ++j) dot += drow[j] * prow[j];
        for (int64_t j = 0; j <= i; ++j) drow[j] = prow[j] * (drow[j] - dot);
        for (int64_t j = i + 1; j < T; ++j) drow[j] = 0.0f;
      }
      // S = scale q k^T, so dq = scale dS k and dk = scale dS^T q.
      gemm(Trans::No, Trans::No, T, D, T, scale, ds, T, k, C3, 0.0f, dq, C3);
      gemm(Trans::Yes, Trans::No, T, D, T, scale, ds, T, q, C3, 0.0f, dk, C3);
    }
  }
  // The key bias's true contribution is zero: keep what was accumulated before, bit for bit.
  if (key_bias_grad_) {
    key_bias_saved_.resize({width_});
    std::copy_n(key_bias_grad_, width_, key_bias_saved_.data());
  }
  qkv_.backward(dqkv_, dx);
  if (key_bias_grad_) std::copy_n(key_bias_saved_.data(), width_, key_bias_grad_);
}

}  // namespace shardlab
