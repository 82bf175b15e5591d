// adagrad_update on the GPU: the math of kernels/cpu/adagrad_update.h on device pointers, enqueued
// on a stream. All pointers in the args (param, grad, state and the optional param_bf16) are device
// pointers; the call never synchronises. Throws std::runtime_error naming the kernel when the
// launch fails.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/cpu/adagrad_update.h"

namespace shardlab::kernels {

void adagrad_update_cuda(const AdagradArgs& a, cudaStream_t stream);

}  // namespace shardlab::kernels
