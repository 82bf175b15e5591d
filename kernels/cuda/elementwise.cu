// The element math of kernels/cpu/elementwise.h, one thread per element in grid-stride loops
// (bit-identical to the CPU: one IEEE add or multiply per element). bias_grad is one thread per
// column adding the rows in increasing order onto the existing value, as the CPU does: the same
// bits, and no atomics.
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/warp_rows.cuh"

namespace shardlab::kernels {

namespace {

// out may alias a or b: no __restrict__.
__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = a[i] + b[i];
}

__global__ void scale_kernel(float* __restrict__ x, int64_t n, float s) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    x[i] *= s;
}

__global__ void bias_add_kernel(float* __restrict__ y, const float* __restrict__ bias, int64_t n,
                                int64_t cols) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] += bias[i % cols];
}

// One thread per column; adjacent threads read adjacent columns of each row (coalesced).
__global__ void bias_grad_kernel(const float* __restrict__ dy, float* __restrict__ dbias,
                                 int64_t rows, int64_t cols) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < cols;
       c += stride) {
    float acc = dbias[c];
    for (int64_t r = 0; r < rows; ++r) acc += dy[r * cols + c];
    dbias[c] = acc;
  }
}

void check_shape(const char* kernel, int64_t rows, int64_t cols) {
  cuda_detail::check_n(kernel, rows);
  cuda_detail::check_n(kernel, cols);
}

}  // namespace

void add_cuda(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
  constexpr const char* kName = "add_cuda";
  cuda_detail::check_n(kName, n);
  if (n == 0) return;
  add_kernel<<<cuda_detail::blocks_for(n), cuda_detail::kThreads, 0, stream>>>(a, b, out, n);
  cuda_detail::check_launch(kName);
}

void scale_cuda(float* x, int64_t n, float s, cudaStream_t stream) {
  constexpr const char* kName = "scale_cuda";
  cuda_detail::check_n(kName, n);
  if (n == 0) return;
  scale_kernel<<<cuda_detail::blocks_for(n), cuda_detail::kThreads, 0, stream>>>(x, n, s);
  cuda_detail::check_launch(kName);
}

void bias_add_cuda(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream) {
  constexpr const char* kName = "bias_add_cuda";
  check_shape(kName, rows, cols);
  if (rows == 0 || cols == 0) return;
  const int64_t n = rows * cols;
  bias_add_kernel<<<cuda_detail::blocks_for(n), cuda_detail::kThreads, 0, stream>>>(y, bias, n,
                                                                                    cols);
  cuda_detail::check_launch(kName);
}

void bias_grad_cuda(const float* dy, float* dbias, int64_t rows, int64_t cols,
                    cudaStream_t stream) {
  constexpr const char* kName = "bias_grad_cuda";
  check_shape(kName, rows, cols);
  if (rows == 0 || cols == 0) return;
  bias_grad_kernel<<<cuda_detail::column_blocks(cols), cuda_detail::kColumnThreads, 0, stream>>>(
      dy, dbias, rows, cols);
  cuda_detail::check_launch(kName);
}

}  // namespace shardlab::kernels
