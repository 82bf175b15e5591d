// ReLU and GELU (tanh approximation) on the GPU: the math of kernels/cpu/activation.h on device
// pointers, enqueued on a stream. Never synchronises; throws std::runtime_error naming the kernel
// when a launch fails. GELU uses the device's tanhf, so it may differ from the CPU's std::tanh
// in the last bits.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace shardlab::kernels {

void relu_forward_cuda(const float* x, float* y, int64_t n, cudaStream_t stream);
void relu_backward_cuda(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream);
void gelu_forward_cuda(const float* x, float* y, float* tanh_out, int64_t n, cudaStream_t stream);
void gelu_backward_cuda(const float* x, const float* tanh_in, const float* dy, float* dx, int64_t n,
                        cudaStream_t stream);

}  // namespace shardlab::kernels
