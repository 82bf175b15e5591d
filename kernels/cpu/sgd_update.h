// Fused SGD step over a flat float range (PyTorch's torch.optim.SGD is the semantic reference).
#pragma once

#include <cstdint>

namespace shardlab::kernels {

struct SgdArgs {
  float* param = nullptr;
  const float* grad = nullptr;
  // Momentum buffer, n elements; may be null when momentum == 0 (plain SGD keeps no state).
  float* momentum_buf = nullptr;
  int64_t n = 0;
  double lr = 0.0;
  double momentum = 0.0;
  double weight_decay = 0.0;  // L2: added to the gradient as wd * p
  bool nesterov = false;      // needs momentum > 0
};

// g = grad + wd * p
// momentum > 0: buf = momentum * buf + g (dampening 0; on the first step buf is zero, so this is
//               PyTorch's buf = g exactly), d = nesterov ? g + momentum * buf : buf
// otherwise:    d = g
// p -= lr * d
// param, grad and momentum_buf must not overlap.
void sgd_update(const SgdArgs& a);

}  // namespace shardlab::kernels
