// Residual add, scaling, bias add and bias gradient on the GPU: the math of
// kernels/cpu/elementwise.h on device pointers, enqueued on a stream. bias_grad is one thread per
// column adding the rows in increasing order (deterministic, the CPU's order). Never synchronises;
// throws std::runtime_error naming the kernel when a launch fails.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace shardlab::kernels {

void add_cuda(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
void scale_cuda(float* x, int64_t n, float s, cudaStream_t stream);
void bias_add_cuda(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream);
void bias_grad_cuda(const float* dy, float* dbias, int64_t rows, int64_t cols, cudaStream_t stream);

}  // namespace shardlab::kernels
