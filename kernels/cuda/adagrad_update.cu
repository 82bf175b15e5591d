// Same element math as kernels/cpu/adagrad_update.cpp, in the same order, with the coefficients
// cast to float on the host as there. Built with --fmad=false and IEEE sqrt and division, so each
// element rounds exactly as on the CPU.
#include <cuda_bf16.h>

#include "kernels/cuda/adagrad_update.h"
#include "kernels/cuda/launch.cuh"

namespace shardlab::kernels {

namespace {

template <bool Bf16>
__global__ void adagrad_kernel(float* __restrict__ p, const float* __restrict__ g,
                               float* __restrict__ s, __nv_bfloat16* __restrict__ pb, int64_t n,
                               float lr, float eps, float wd) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float gi = g[i] + wd * p[i];
    const float si = s[i] + gi * gi;
    s[i] = si;
    const float out = p[i] - lr * gi / (sqrtf(si) + eps);
    p[i] = out;
    if constexpr (Bf16) pb[i] = __float2bfloat16_rn(out);
  }
}

}  // namespace

void adagrad_update_cuda(const AdagradArgs& a, cudaStream_t stream) {
  constexpr const char* kName = "adagrad_update_cuda";
  cuda_detail::check_n(kName, a.n);
  if (a.n == 0) return;
  const auto lr = static_cast<float>(a.lr);
  const auto eps = static_cast<float>(a.eps);
  const auto wd = static_cast<float>(a.weight_decay);
  auto* pb = reinterpret_cast<__nv_bfloat16*>(a.param_bf16);
  const int blocks = cuda_detail::blocks_for(a.n);
  if (pb != nullptr)
    adagrad_kernel<true><<<blocks, cuda_detail::kThreads, 0, stream>>>(a.param, a.grad, a.sum, pb,
                                                                       a.n, lr, eps, wd);
  else
    adagrad_kernel<false><<<blocks, cuda_detail::kThreads, 0, stream>>>(a.param, a.grad, a.sum, pb,
                                                                        a.n, lr, eps, wd);
  cuda_detail::check_launch(kName);
}

}  // namespace shardlab::kernels
