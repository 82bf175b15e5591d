// Fused RMSprop step over a flat float range (PyTorch's torch.optim.RMSprop, centered=False, is
// the semantic reference).
#pragma once

#include <cstdint>

namespace shardlab::kernels {

struct RmspropArgs {
  float* param = nullptr;
  const float* grad = nullptr;
  float* square_avg = nullptr;  // v, n elements
  // Momentum buffer, n elements; may be null when momentum == 0.
  float* momentum_buf = nullptr;
  int64_t n = 0;
  double lr = 0.0;
  double alpha = 0.99;
  double eps = 1e-8;
  double momentum = 0.0;
  double weight_decay = 0.0;  // L2: added to the gradient as wd * p
  // Optional bf16 copy of param, n elements: when set, param is the fp32 master and each updated
  // master value is also written here rounded to nearest even (see kernels/cpu/bf16.h).
  uint16_t* param_bf16 = nullptr;
};

// g = grad + wd * p
// v = alpha * v + (1 - alpha) * g^2
// momentum > 0: buf = momentum * buf + g / (sqrt(v) + eps), p -= lr * buf
// otherwise:    p -= lr * g / (sqrt(v) + eps)
// param_bf16 (if set) = bf16(p)
// param, grad, square_avg, momentum_buf and param_bf16 must not overlap.
void rmsprop_update(const RmspropArgs& a);

}  // namespace shardlab::kernels
