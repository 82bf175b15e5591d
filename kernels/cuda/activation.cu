// The element math of kernels/cpu/activation.h, one thread per element in grid-stride loops, in
// the CPU's order of operations (built with --fmad=false, so no contraction). ReLU is
// bit-identical to the CPU. GELU calls the device's tanhf (within 2 ulp), not the CPU's tanh
// (kernels/cpu/activation.cpp: evaluated in double, within 1 ulp), so t, and through it y and dx,
// may differ from the CPU in the last bits; the rest of the GELU arithmetic rounds exactly as on
// the CPU.
#include "kernels/cuda/activation.h"
#include "kernels/cuda/launch.cuh"

#include <cmath>

namespace shardlab::kernels {

namespace {

constexpr float kGeluC = 0.044715f;

// The CPU's constant: sqrt(2/pi) in double, rounded once to float (passed from the host, so it is
// the same float).
float sqrt_2_over_pi() {
  return static_cast<float>(std::sqrt(2.0 / 3.14159265358979323846));
}

// y may alias x, dx may alias dy: no __restrict__ on those.
__global__ void relu_forward_kernel(const float* x, float* y, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float v = x[i];
    y[i] = v < 0.0f ? 0.0f : v;  // std::max(v, 0.0f), NaN and -0 included
  }
}

__global__ void relu_backward_kernel(const float* __restrict__ y, const float* dy, float* dx,
                                     int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__device__ inline float gelu_tanh(float v, float s2pi) {
  return tanhf(s2pi * (v + kGeluC * v * v * v));
}

__global__ void gelu_forward_kernel(const float* x, float* y, float* tanh_out, int64_t n,
                                    float s2pi) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float v = x[i];
    const float t = gelu_tanh(v, s2pi);
    if (tanh_out != nullptr) tanh_out[i] = t;
    y[i] = 0.5f * v * (1.0f + t);
  }
}

__global__ void gelu_backward_kernel(const float* x, const float* tanh_in, const float* dy,
                                     float* dx, int64_t n, float s2pi) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float v = x[i];
    const float t = tanh_in != nullptr ? tanh_in[i] : gelu_tanh(v, s2pi);
    const float dinner = s2pi * (1.0f + 3.0f * kGeluC * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dinner);
  }
}

}  // namespace

void relu_forward_cuda(const float* x, float* y, int64_t n, cudaStream_t stream) {
  constexpr const char* kName = "relu_forward_cuda";
  cuda_detail::check_n(kName, n);
  if (n == 0) return;
  relu_forward_kernel<<<cuda_detail::blocks_for(n), cuda_detail::kThreads, 0, stream>>>(x, y, n);
  cuda_detail::check_launch(kName);
}

void relu_backward_cuda(const float* y, const float* dy, float* dx, int64_t n,
                        cudaStream_t stream) {
  constexpr const char* kName = "relu_backward_cuda";
  cuda_detail::check_n(kName, n);
  if (n == 0) return;
  relu_backward_kernel<<<cuda_detail::blocks_for(n), cuda_detail::kThreads, 0, stream>>>(y, dy, dx,
                                                                                         n);
  cuda_detail::check_launch(kName);
}

void gelu_forward_cuda(const float* x, float* y, float* tanh_out, int64_t n, cudaStream_t stream) {
  constexpr const char* kName = "gelu_forward_cuda";
  cuda_detail::check_n(kName, n);
  if (n == 0) return;
  gelu_forward_kernel<<<cuda_detail::blocks_for(n), cuda_detail::kThreads, 0, stream>>>(
      x, y, tanh_out, n, sqrt_2_over_pi());
  cuda_detail::check_launch(kName);
}

void gelu_backward_cuda(const float* x, const float* tanh_in, const float* dy, float* dx, int64_t n,
                        cudaStream_t stream) {
  constexpr const char* kName = "gelu_backward_cuda";
  cuda_detail::check_n(kName, n);
  if (n == 0) return;
  gelu_backward_kernel<<<cuda_detail::blocks_for(n), cuda_detail::kThreads, 0, stream>>>(
      x, tanh_in, dy, dx, n, sqrt_2_over_pi());
  cuda_detail::check_launch(kName);
}

}  // namespace shardlab::kernels
