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
};

// g = grad + wd * p
// sum += g^2
// p -= lr * g / (sqrt(sum) + eps)
// param, grad and sum must not overlap.
void adagrad_update(const AdagradArgs& a);

}  // namespace shardlab::kernels
