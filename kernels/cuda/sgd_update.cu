// Same element math as kernels/cpu/sgd_update.cpp, in the same order, with the coefficients cast
// to float on the host as there. The target is built with --fmad=false (kernels/CMakeLists.txt),
// so no multiply-add is fused and each element rounds exactly as on the CPU.
#include <cuda_bf16.h>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/sgd_update.h"

namespace shardlab::kernels {

namespace {

enum class Mode { plain, momentum, nesterov };

template <Mode M, bool Bf16>
__global__ void sgd_kernel(float* __restrict__ p, const float* __restrict__ g,
                           float* __restrict__ buf, __nv_bfloat16* __restrict__ pb, int64_t n,
                           float lr, float m, float wd) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float gi = g[i] + wd * p[i];
    float pi;
    if constexpr (M == Mode::plain) {
      pi = p[i] - lr * gi;
    } else {
      const float b = m * buf[i] + gi;
      buf[i] = b;
      if constexpr (M == Mode::nesterov)
        pi = p[i] - lr * (gi + m * b);
      else
        pi = p[i] - lr * b;
    }
    p[i] = pi;
    if constexpr (Bf16) pb[i] = __float2bfloat16_rn(pi);
  }
}

template <Mode M>
void launch(const SgdArgs& a, cudaStream_t s, float lr, float m, float wd) {
  auto* pb = reinterpret_cast<__nv_bfloat16*>(a.param_bf16);
  const int blocks = cuda_detail::blocks_for(a.n);
  if (pb != nullptr)
    sgd_kernel<M, true><<<blocks, cuda_detail::kThreads, 0, s>>>(a.param, a.grad, a.momentum_buf,
                                                                 pb, a.n, lr, m, wd);
  else
    sgd_kernel<M, false><<<blocks, cuda_detail::kThreads, 0, s>>>(a.param, a.grad, a.momentum_buf,
                                                                  pb, a.n, lr, m, wd);
}

}  // namespace

void sgd_update_cuda(const SgdArgs& a, cudaStream_t stream) {
  constexpr const char* kName = "sgd_update_cuda";
  cuda_detail::check_n(kName, a.n);
  if (a.n == 0) return;
  const auto lr = static_cast<float>(a.lr);
  const auto m = static_cast<float>(a.momentum);
  const auto wd = static_cast<float>(a.weight_decay);
  if (a.momentum == 0.0)
    launch<Mode::plain>(a, stream, lr, m, wd);
  else if (a.nesterov)
    launch<Mode::nesterov>(a, stream, lr, m, wd);
  else
    launch<Mode::momentum>(a, stream, lr, m, wd);
  cuda_detail::check_launch(kName);
}

}  // namespace shardlab::kernels
