// Causal multi-head attention on the GPU: the math of kernels/cpu/attention.h on device pointers.
// The four products per (batch, head) are strided-batched cuBLAS GEMMs over the heads of one
// batch row; the masked softmax and its backward are kernels with one warp per score row, adding
// in column order as the CPU does. Runs on the stream set on `handle`. Never synchronises;
// throws std::runtime_error naming the call on failure.
#pragma once

#include <cublas_v2.h>

#include "kernels/cpu/attention.h"

namespace shardlab::kernels {

void causal_attention_forward_cuda(const AttentionDims& dims, const float* qkv, float* probs,
                                   float* att, cublasHandle_t handle);

// dscores: scratch of heads * T * T floats (one batch row's heads at a time; the CPU needs T*T).
void causal_attention_backward_cuda(const AttentionDims& dims, const float* qkv, const float* probs,
                                    const float* datt, float* dqkv, float* dscores,
                                    cublasHandle_t handle);

}  // namespace shardlab::kernels
