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
  // Optional bf16 copy of param, n elements: when set, param is the fp32 master and each updated
  // master value is also written here rounded to nearest even (see kernels/cpu/bf16.h).
  uint16_t* param_bf16 = nullptr;
};

// g = grad + wd * p
// momentum > 0: buf = momentum * buf + g (dampening 0; on the first step buf is zero, so this is
//               PyTorch's buf = g exactly), d = nesterov ? g + momentum * buf : buf
// otherwise:    d = g
// p -= lr * d
// param_bf16 (if set) = bf16(p)
// param, grad, momentum_buf and param_bf16 must not overlap.
void sgd_update(const SgdArgs& a);

}  // namespace shardlab::kernels
