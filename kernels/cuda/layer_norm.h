// LayerNorm on the GPU: the math of kernels/cpu/layer_norm.h on device pointers, enqueued on a
// stream. The weight and bias gradients are column sums over the rows in increasing order (one
// thread per column, no atomics): deterministic, and the same order as the CPU. Never
// synchronises; throws std::runtime_error naming the kernel when a launch fails.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace shardlab::kernels {

void layer_norm_forward_cuda(const float* x, const float* weight, const float* bias, float* y,
                             float* xhat, float* rstd, int64_t rows, int64_t dim, float eps,
                             cudaStream_t stream);
void layer_norm_backward_cuda(const float* dy, const float* xhat, const float* rstd,
                              const float* weight, float* dx, float* dweight, float* dbias,
                              int64_t rows, int64_t dim, cudaStream_t stream);

}  // namespace shardlab::kernels
