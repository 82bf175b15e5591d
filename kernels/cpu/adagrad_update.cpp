// One branch-free pass over param, grad and the accumulator. Element math is fp32; see
// adam_update.cpp for why the kernel sources are built with -fno-math-errno.
#include "kernels/cpu/adagrad_update.h"

#include <cmath>

#include "kernels/cpu/bf16.h"

#if defined(__GNUC__) && !defined(__NO_MATH_ERRNO__)
#warning "built without -fno-math-errno: the sqrt below will not vectorise (about 2.5x slower)"
#endif

namespace shardlab::kernels {

namespace {

void adagrad_loop(float* __restrict p, const float* __restrict g, float* __restrict s, int64_t n,
                  float lr, float eps, float wd) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + wd * p[i];
    const float si = s[i] + gi * gi;
    s[i] = si;
    p[i] -= lr * gi / (std::sqrt(si) + eps);
  }
}

}  // namespace

void adagrad_update(const AdagradArgs& a) {
  detail::update_with_bf16_copy(a.param, a.param_bf16, a.n, [&](int64_t o, int64_t n) {
    adagrad_loop(a.param + o, a.grad + o, a.sum + o, n, static_cast<float>(a.lr),
                 static_cast<float>(a.eps), static_cast<float>(a.weight_decay));
  });
}

}  // namespace shardlab::kernels
