// With and without momentum are separate branch-free loops (the momentum buffer is a fifth
// stream only when it exists). Element math is fp32; see adam_update.cpp for why the kernel
// sources are built with -fno-math-errno.
#include "kernels/cpu/rmsprop_update.h"

#include <cmath>

#include "kernels/cpu/bf16.h"

#if defined(__GNUC__) && !defined(__NO_MATH_ERRNO__)
#warning "built without -fno-math-errno: the sqrt below will not vectorise (about 2.5x slower)"
#endif

namespace shardlab::kernels {

namespace {

void rmsprop_plain(float* __restrict p, const float* __restrict g, float* __restrict v, int64_t n,
                   float lr, float alpha, float c, float eps, float wd) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + wd * p[i];
    const float vi = alpha * v[i] + c * gi * gi;
    v[i] = vi;
    p[i] -= lr * gi / (std::sqrt(vi) + eps);
  }
}

void rmsprop_momentum(float* __restrict p, const float* __restrict g, float* __restrict v,
                      float* __restrict buf, int64_t n, float lr, float alpha, float c, float eps,
                      float m, float wd) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + wd * p[i];
    const float vi = alpha * v[i] + c * gi * gi;
    v[i] = vi;
    const float b = m * buf[i] + gi / (std::sqrt(vi) + eps);
    buf[i] = b;
    p[i] -= lr * b;
  }
}

}  // namespace

void rmsprop_update(const RmspropArgs& a) {
  const auto lr = static_cast<float>(a.lr);
  const auto alpha = static_cast<float>(a.alpha);
  // 1 - alpha in double, then cast: in float it cancels (1.0f - 0.99f is 1e-6 relative off).
  const auto c = static_cast<float>(1.0 - a.alpha);
  const auto eps = static_cast<float>(a.eps);
  const auto wd = static_cast<float>(a.weight_decay);
  detail::update_with_bf16_copy(a.param, a.param_bf16, a.n, [&](int64_t o, int64_t n) {
    if (a.momentum == 0.0)
      rmsprop_plain(a.param + o, a.grad + o, a.square_avg + o, n, lr, alpha, c, eps, wd);
    else
      rmsprop_momentum(a.param + o, a.grad + o, a.square_avg + o, a.momentum_buf + o, n, lr, alpha,
                       c, eps, static_cast<float>(a.momentum), wd);
  });
}

}  // namespace shardlab::kernels
