// Softmax with cross-entropy on the GPU: the math of kernels/cpu/softmax_xent.h on device
// pointers (logits, targets, probs, row_loss, row_correct, dlogits), enqueued on a stream. The
// caller copies row_loss back and sums it in row order, as the CPU does. Targets must have been
// checked on the host. Never synchronises; throws std::runtime_error naming the kernel when a
// launch fails.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace shardlab::kernels {

void softmax_xent_forward_cuda(const float* logits, const int32_t* targets, float* probs,
                               double* row_loss, int32_t* row_correct, int64_t rows,
                               int64_t classes, cudaStream_t stream);
void softmax_xent_backward_cuda(const float* probs, const int32_t* targets, float* dlogits,
                                int64_t rows, int64_t classes, float scale, cudaStream_t stream);

}  // namespace shardlab::kernels
