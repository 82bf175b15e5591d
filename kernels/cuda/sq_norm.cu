#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/sq_norm.h"

namespace shardlab::kernels {

namespace {

constexpr int kWarps = cuda_detail::kThreads / 32;

// Sum of v over the block, valid in thread 0. Fixed shape: shuffle tree within each warp, then
// warp 0 sums the warp totals.
__device__ double block_sum(double v) {
  __shared__ double warp_sums[kWarps];
  for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  v = threadIdx.x < kWarps ? warp_sums[threadIdx.x] : 0.0;
  if (warp == 0)
    for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}

__global__ void partial_kernel(const float* __restrict__ x, int64_t n,
                               double* __restrict__ partial) {
  double s = 0.0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const double xi = x[i];
    s += xi * xi;
  }
  s = block_sum(s);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void final_kernel(const double* __restrict__ partial, int count,
                             double* __restrict__ out) {
  double s = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) s += partial[i];
  s = block_sum(s);
  if (threadIdx.x == 0) *out = s;
}

}  // namespace

void sq_norm_cuda(const float* x, int64_t n, double* out, cudaStream_t stream) {
  constexpr const char* kName = "sq_norm_cuda";
  cuda_detail::check_n(kName, n);
  if (n == 0) {
    cuda_detail::check(kName, "cudaMemsetAsync", cudaMemsetAsync(out, 0, sizeof(double), stream));
    return;
  }
  const int blocks = cuda_detail::blocks_for(n);
  void* ws = nullptr;
  cuda_detail::check(kName, "cudaMallocAsync of the partial sums",
                     cudaMallocAsync(&ws, sizeof(double) * blocks, stream));
  auto* partial = static_cast<double*>(ws);
  partial_kernel<<<blocks, cuda_detail::kThreads, 0, stream>>>(x, n, partial);
  const cudaError_t e1 = cudaGetLastError();
  if (e1 == cudaSuccess)
    final_kernel<<<1, cuda_detail::kThreads, 0, stream>>>(partial, blocks, out);
  const cudaError_t e2 = e1 == cudaSuccess ? cudaGetLastError() : e1;
  // Freed in stream order whatever happened, so a failed launch leaks nothing.
  const cudaError_t e3 = cudaFreeAsync(ws, stream);
  cuda_detail::check(kName, "launch failed", e2);
  cuda_detail::check(kName, "cudaFreeAsync of the partial sums", e3);
}

}  // namespace shardlab::kernels
