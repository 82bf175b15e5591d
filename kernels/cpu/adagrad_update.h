// Fused Adagrad step over a flat float range (PyTorch's torch.optim.Adagrad with lr_decay = 0 is
// the semantic reference).
#pragma once

#include <cstdint>

namespace shardlab::kernels {

struct AdagradArgs {
  float* param = nullptr;
  const float* grad = nullptr;
  float* sum = nullptr;  // accumulated squared gradients, n elements (starts at the initial value)
  int64_t n = 0;
  double lr = 0.0;
  double eps = 1e-10;
  double weight_decay = 0.0;  // L2: added to the gradient as wd * p
  // Optional bf16 copy of param, n elements: when set, param is the fp32 master and each updated
  // master value is also written here rounded to nearest even (see kernels/cpu/bf16.h).
  uint16_t* param_bf16 = nullptr;
};

// g = grad + wd * p
// sum += g^2
// p -= lr * g / (sqrt(sum) + eps)
// param_bf16 (if set) = bf16(p)
// param, grad, sum and param_bf16 must not overlap.
void adagrad_update(const AdagradArgs& a);

}  // namespace shardlab::kernels
