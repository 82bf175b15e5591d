// Same element math as kernels/cpu/rmsprop_update.cpp, in the same order, with 1 - alpha computed
// in double and the coefficients cast to float on the host as there. Built with --fmad=false and
// IEEE sqrt and division, so each element rounds exactly as on the CPU.
#include <cuda_bf16.h>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/rmsprop_update.h"

namespace shardlab::kernels {

namespace {

template <bool Momentum, bool Bf16>
__global__ void rmsprop_kernel(float* __restrict__ p, const float* __restrict__ g,
                               float* __restrict__ v, float* __restrict__ buf,
                               __nv_bfloat16* __restrict__ pb, int64_t n, float lr, float alpha,
                               float c, float eps, float m, float wd) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float gi = g[i] + wd * p[i];
    const float vi = alpha * v[i] + c * gi * gi;
    v[i] = vi;
    float out;
    if constexpr (Momentum) {
      const float b = m * buf[i] + gi / (sqrtf(vi) + eps);
      buf[i] = b;
      out = p[i] - lr * b;
    } else {
      out = p[i] - lr * gi / (sqrtf(vi) + eps);
    }
    p[i] = out;
    if constexpr (Bf16) pb[i] = __float2bfloat16_rn(out);
  }
}

template <bool Momentum>
void launch(const RmspropArgs& a, cudaStream_t s, float lr, float alpha, float c, float eps,
            float m, float wd) {
  auto* pb = reinterpret_cast<__nv_bfloat16*>(a.param_bf16);
  const int blocks = cuda_detail::blocks_for(a.n);
  if (pb != nullptr)
    rmsprop_kernel<Momentum, true><<<blocks, cuda_detail::kThreads, 0, s>>>(
        a.param, a.grad, a.square_avg, a.momentum_buf, pb, a.n, lr, alpha, c, eps, m, wd);
  else
    rmsprop_kernel<Momentum, false><<<blocks, cuda_detail::kThreads, 0, s>>>(
        a.param, a.grad, a.square_avg, a.momentum_buf, pb, a.n, lr, alpha, c, eps, m, wd);
}

}  // namespace

void rmsprop_update_cuda(const RmspropArgs& a, cudaStream_t stream) {
  constexpr const char* kName = "rmsprop_update_cuda";
  cuda_detail::check_n(kName, a.n);
  if (a.n == 0) return;
  const auto lr = static_cast<float>(a.lr);
  const auto alpha = static_cast<float>(a.alpha);
  const auto c = static_cast<float>(1.0 - a.alpha);
  const auto eps = static_cast<float>(a.eps);
  const auto m = static_cast<float>(a.momentum);
  const auto wd = static_cast<float>(a.weight_decay);
  if (a.momentum == 0.0)
    launch<false>(a, stream, lr, alpha, c, eps, m, wd);
  else
    launch<true>(a, stream, lr, alpha, c, eps, m, wd);
  cuda_detail::check_launch(kName);
}

}  // namespace shardlab::kernels
