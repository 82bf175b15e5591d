// The rank-local parts of the vocabulary-parallel softmax cross-entropy on the GPU: the math of
// kernels/cpu/vocab_xent.h on device pointers (logits, row_max, targets, sum_exp, target_logit,
// probs, row_loss, dlogits, neg_best), enqueued on a stream; the all-reduces between them are the
// caller's. cols may be 0 (every per-row output is still written). Targets must have been checked
// on the host. Never synchronises; throws std::runtime_error naming the kernel when a launch
// fails or a size is negative.
//
// Same bits as the CPU: row_max, target_logit, the backward and the argmax (comparisons, copies
// and one float multiply-subtract in the CPU's order). sum_exp, probs and row_loss keep the CPU's
// order of operations and its float/double conversions; only the device's double exp and log are
// not glibc's (both within 1 ulp), so their doubles may differ in the last bit, which the float
// results almost never show (as kernels/cuda/softmax_xent.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace shardlab::kernels {

void vocab_xent_row_max_cuda(const float* logits, float* row_max, int64_t rows, int64_t cols,
                             cudaStream_t stream);
void vocab_xent_partials_cuda(const float* logits, const float* row_max, const int32_t* targets,
                              int64_t vocab_begin, float* sum_exp, float* target_logit,
                              int64_t rows, int64_t cols, cudaStream_t stream);
void vocab_xent_probs_cuda(const float* logits, const float* row_max, const float* sum_exp,
                           const float* target_logit, float* probs, double* row_loss, int64_t rows,
                           int64_t cols, cudaStream_t stream);
void vocab_xent_backward_cuda(const float* probs, const int32_t* targets, int64_t vocab_begin,
                              float* dlogits, int64_t rows, int64_t cols, float inv_rows,
                              cudaStream_t stream);
void vocab_xent_argmax_neg_id_cuda(const float* logits, const float* row_max, int64_t vocab_begin,
                                   float* neg_best, int64_t rows, int64_t cols,
                                   cudaStream_t stream);

}  // namespace shardlab::kernels
