// Fused Adam / AdamW step over a flat float range (PyTorch's torch.optim.Adam and AdamW, without
// amsgrad, are the semantic reference).
#pragma once

#include <cstdint>

namespace shardlab::kernels {

struct AdamArgs {
  float* param = nullptr;
  const float* grad = nullptr;
  float* exp_avg = nullptr;     // first moment m, n elements
  float* exp_avg_sq = nullptr;  // second moment v, n elements
  int64_t n = 0;
  double lr = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled = false;  // true: AdamW's decoupled decay; false: Adam's L2 on the gradient
  int64_t step = 1;        // 1-based step count, for the bias corrections
  // Optional bf16 copy of param, n elements: when set, param is the fp32 master and each updated
  // master value is also written here rounded to nearest even (see kernels/cpu/bf16.h).
  uint16_t* param_bf16 = nullptr;
};

// Adam:  g = grad + wd * p                AdamW: p *= 1 - lr * wd, g = grad
// m = beta1 * m + (1 - beta1) * g
// v = beta2 * v + (1 - beta2) * g^2
// p -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
// param_bf16 (if set) = bf16(p)
// param, grad, exp_avg, exp_avg_sq and param_bf16 must not overlap.
void adam_update(const AdamArgs& a);

}  // namespace shardlab::kernels
