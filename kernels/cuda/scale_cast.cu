// Built with --fmad=false like the other kernels (there is nothing to fuse here, but the flag
// keeps the rule simple: every element rounds as on the CPU).
#include <cuda_bf16.h>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/scale_cast.h"

namespace shardlab::kernels {

namespace {

__global__ void to_bf16_kernel(const float* __restrict__ in, __nv_bfloat16* __restrict__ out,
                               int64_t n, float scale) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = __float2bfloat16_rn(scale * in[i]);
}

__global__ void from_bf16_kernel(const __nv_bfloat16* __restrict__ in, float* __restrict__ out,
                                 int64_t n, float scale) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = scale * __bfloat162float(in[i]);
}

}  // namespace

void scale_cast_to_bf16_cuda(const float* in, uint16_t* out, int64_t n, float scale,
                             cudaStream_t stream) {
  constexpr const char* kName = "scale_cast_to_bf16_cuda";
  cuda_detail::check_n(kName, n);
  if (n == 0) return;
  to_bf16_kernel<<<cuda_detail::blocks_for(n), cuda_detail::kThreads, 0, stream>>>(
      in, reinterpret_cast<__nv_bfloat16*>(out), n, scale);
  cuda_detail::check_launch(kName);
}

void scale_cast_from_bf16_cuda(const uint16_t* in, float* out, int64_t n, float scale,
                               cudaStream_t stream) {
  constexpr const char* kName = "scale_cast_from_bf16_cuda";
  cuda_detail::check_n(kName, n);
  if (n == 0) return;
  from_bf16_kernel<<<cuda_detail::blocks_for(n), cuda_detail::kThreads, 0, stream>>>(
      reinterpret_cast<const __nv_bfloat16*>(in), out, n, scale);
  cuda_detail::check_launch(kName);
}

}  // namespace shardlab::kernels
