// Same element math as kernels/cpu/adam_update.cpp, in the same order: the bias corrections and
// 1 - beta are computed in double on the host and cast to float exactly as there, and the loop is
// fp32. The target is built with --fmad=false and IEEE sqrt and division (nvcc's defaults without
// --use_fast_math), so each element rounds exactly as on the CPU.
#include <cuda_bf16.h>

#include <cmath>

#include "kernels/cuda/adam_update.h"
#include "kernels/cuda/launch.cuh"

namespace shardlab::kernels {

namespace {

struct Coeffs {
  float b1, c1, b2, c2, l2, decay, step_size, inv_sqrt_bc2, eps;
};

template <bool Bf16>
__global__ void adam_kernel(float* __restrict__ p, const float* __restrict__ g,
                            float* __restrict__ m, float* __restrict__ v,
                            __nv_bfloat16* __restrict__ pb, int64_t n, Coeffs c) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float pi = p[i] * c.decay;
    const float gi = g[i] + c.l2 * pi;
    const float mi = c.b1 * m[i] + c.c1 * gi;
    const float vi = c.b2 * v[i] + c.c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float out = pi - c.step_size * mi / (sqrtf(vi) * c.inv_sqrt_bc2 + c.eps);
    p[i] = out;
    if constexpr (Bf16) pb[i] = __float2bfloat16_rn(out);
  }
}

}  // namespace

void adam_update_cuda(const AdamArgs& a, cudaStream_t stream) {
  constexpr const char* kName = "adam_update_cuda";
  cuda_detail::check_n(kName, a.n);
  if (a.n == 0) return;
  const double bc1 = 1.0 - std::pow(a.beta1, static_cast<double>(a.step));
  const double bc2 = 1.0 - std::pow(a.beta2, static_cast<double>(a.step));
  const double l2 = a.decoupled ? 0.0 : a.weight_decay;
  const double decay = a.decoupled ? 1.0 - a.lr * a.weight_decay : 1.0;
  const Coeffs c{static_cast<float>(a.beta1),    static_cast<float>(1.0 - a.beta1),
                 static_cast<float>(a.beta2),    static_cast<float>(1.0 - a.beta2),
                 static_cast<float>(l2),         static_cast<float>(decay),
                 static_cast<float>(a.lr / bc1), static_cast<float>(1.0 / std::sqrt(bc2)),
                 static_cast<float>(a.eps)};
  auto* pb = reinterpret_cast<__nv_bfloat16*>(a.param_bf16);
  const int blocks = cuda_detail::blocks_for(a.n);
  if (pb != nullptr)
    adam_kernel<true><<<blocks, cuda_detail::kThreads, 0, stream>>>(a.param, a.grad, a.exp_avg,
                                                                    a.exp_avg_sq, pb, a.n, c);
  else
    adam_kernel<false><<<blocks, cuda_detail::kThreads, 0, stream>>>(a.param, a.grad, a.exp_avg,
                                                                     a.exp_avg_sq, pb, a.n, c);
  cuda_detail::check_launch(kName);
}

}  // namespace shardlab::kernels
