// One pass over param, grad and both moments: 4 streams read, 3 written, nothing else. The bias
// corrections are folded into two scalars computed in double (beta^step underflows gracefully
// there and stays accurate for large step counts), so the loop has one sqrt and one division per
// element and no branch. Adam and AdamW share the loop: Adam passes decay = 1, AdamW passes
// l2 = 0, and the unused term is then an exact no-op.
//
// The sqrt only vectorises without errno handling: the kernel sources are compiled with
// -fno-math-errno (see kernels/CMakeLists.txt), which changes no result.
#include "kernels/cpu/adam_update.h"

#include <cmath>

#include "kernels/cpu/bf16.h"

#if defined(__GNUC__) && !defined(__NO_MATH_ERRNO__)
#warning "built without -fno-math-errno: the sqrt below will not vectorise (about 2.5x slower)"
#endif

namespace shardlab::kernels {

namespace {

void adam_loop(float* __restrict p, const float* __restrict g, float* __restrict m,
               float* __restrict v, int64_t n, float b1, float c1, float b2, float c2, float l2,
               float decay, float step_size, float inv_sqrt_bc2, float eps) {
  for (int64_t i = 0; i < n; ++i) {
    const float pi = p[i] * decay;
    const float gi = g[i] + l2 * pi;
    const float mi = b1 * m[i] + c1 * gi;
    const float vi = b2 * v[i] + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi - step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps);
  }
}

}  // namespace

void adam_update(const AdamArgs& a) {
  const double bc1 = 1.0 - std::pow(a.beta1, static_cast<double>(a.step));
  const double bc2 = 1.0 - std::pow(a.beta2, static_cast<double>(a.step));
  const double l2 = a.decoupled ? 0.0 : a.weight_decay;
  const double decay = a.decoupled ? 1.0 - a.lr * a.weight_decay : 1.0;
  // 1 - beta in double: in float, 1.0f - 0.999f cancels to 0.000999987 (1.3e-5 off), which
  // would bias v and hence every step by about 6e-6.
  detail::update_with_bf16_copy(a.param, a.param_bf16, a.n, [&](int64_t o, int64_t n) {
    adam_loop(a.param + o, a.grad + o, a.exp_avg + o, a.exp_avg_sq + o, n,
              static_cast<float>(a.beta1), static_cast<float>(1.0 - a.beta1),
              static_cast<float>(a.beta2), static_cast<float>(1.0 - a.beta2),
              static_cast<float>(l2), static_cast<float>(decay), static_cast<float>(a.lr / bc1),
              static_cast<float>(1.0 / std::sqrt(bc2)), static_cast<float>(a.eps));
  });
}

}  // namespace shardlab::kernels
