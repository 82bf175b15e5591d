// Each variant is its own branch-free loop, so the choice is made once per call and every loop
// vectorises. Coefficients are cast to float once: the element math is fp32 throughout.
#include "kernels/cpu/sgd_update.h"

#include "kernels/cpu/bf16.h"

namespace shardlab::kernels {

namespace {

void sgd_plain(float* __restrict p, const float* __restrict g, int64_t n, float lr, float wd) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + wd * p[i];
    p[i] -= lr * gi;
  }
}

void sgd_momentum(float* __restrict p, const float* __restrict g, float* __restrict buf, int64_t n,
                  float lr, float m, float wd) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + wd * p[i];
    const float b = m * buf[i] + gi;
    buf[i] = b;
    p[i] -= lr * b;
  }
}

void sgd_nesterov(float* __restrict p, const float* __restrict g, float* __restrict buf, int64_t n,
                  float lr, float m, float wd) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + wd * p[i];
    const float b = m * buf[i] + gi;
    buf[i] = b;
    p[i] -= lr * (gi + m * b);
  }
}

}  // namespace

void sgd_update(const SgdArgs& a) {
  const auto lr = static_cast<float>(a.lr);
  const auto m = static_cast<float>(a.momentum);
  const auto wd = static_cast<float>(a.weight_decay);
  detail::update_with_bf16_copy(a.param, a.param_bf16, a.n, [&](int64_t o, int64_t n) {
    if (a.momentum == 0.0)
      sgd_plain(a.param + o, a.grad + o, n, lr, wd);
    else if (a.nesterov)
      sgd_nesterov(a.param + o, a.grad + o, a.momentum_buf + o, n, lr, m, wd);
    else
      sgd_momentum(a.param + o, a.grad + o, a.momentum_buf + o, n, lr, m, wd);
  });
}

}  // namespace shardlab::kernels
