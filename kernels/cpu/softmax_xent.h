// Softmax with cross-entropy over logits [rows, classes] and one target class per row, forward
// and backward. CPU reference of kernels/cuda/softmax_xent.h. Targets must lie in
// [0, classes): callers check them (the engine's layer throws naming the row).
#pragma once

#include <cstdint>

namespace shardlab::kernels {

// Per row r with target t: lse = max + log(sum_c exp(double(l_c - max))) in double;
// probs[r, c] = float(exp(l_c - lse)); row_loss[r] = lse - l_t (double).
// row_correct (may be null): 1 when the first maximal logit of the row is at t, else 0.
// The mean loss is sum_r row_loss[r] / rows, summed by the caller in row order.
void softmax_xent_forward(const float* logits, const int32_t* targets, float* probs,
                          double* row_loss, int32_t* row_correct, int64_t rows, int64_t classes);

// dlogits = probs * scale, then dlogits[r, t_r] -= scale (scale = 1/rows gives the gradient of
// the mean loss). dlogits may alias probs.
void softmax_xent_backward(const float* probs, const int32_t* targets, float* dlogits, int64_t rows,
                           int64_t classes, float scale);

}  // namespace shardlab::kernels
