#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/gemm.h"

namespace shardlab::kernels {

void causal_attention_forward(const AttentionDims& dims, const float* qkv, float* probs,
                              float* att) {
  const int64_t B = dims.batch, T = dims.steps, H = dims.heads, D = dims.head_dim;
  const int64_t C = dims.width(), C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const float* q = qkv + b * T * C3 + h * D;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* p = probs + (b * H + h) * T * T;
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
      // out = P v, written into this head's columns of att.
      gemm(Trans::No, Trans::No, T, D, T, 1.0f, p, T, v, C3, 0.0f, att + b * T * C + h * D, C);
    }
  }
}

void causal_attention_backward(const AttentionDims& dims, const float* qkv, const float* probs,
                               const float* datt, float* dqkv, float* dscores) {
  const int64_t B = dims.batch, T = dims.steps, H = dims.heads, D = dims.head_dim;
  const int64_t C = dims.width(), C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  float* ds = dscores;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const float* q = qkv + b * T * C3 + h * D;
      const float* k = q + C;
      const float* v = q + 2 * C;
      const float* p = probs + (b * H + h) * T * T;
      const float* dout = datt + b * T * C + h * D;
      float* dq = dqkv + b * T * C3 + h * D;
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
}

}  // namespace shardlab::kernels
