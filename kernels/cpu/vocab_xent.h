// The rank-local parts of the vocabulary-parallel softmax cross-entropy
// (engine/tensor_parallel/vocab_cross_entropy.h): each rank holds the columns
// [vocab_begin, vocab_begin + cols) of logits [rows, vocab], and the engine all-reduces over the
// tp group between these steps:
//
//   vocab_xent_row_max          -> all-reduce max   -> row_max (global)
//   vocab_xent_partials         -> all-reduce sum   -> sum_exp, target_logit (global)
//   vocab_xent_probs            (local probabilities and the per-row loss)
//   vocab_xent_backward         (no communication)
//   vocab_xent_argmax_neg_id    -> all-reduce max   -> the lowest id attaining the maximum
//
// CPU reference of kernels/cuda/vocab_xent.h. cols may be 0 (a rank whose slice is empty); targets
// are global ids, checked by the caller. rows and cols must be >= 0.
#pragma once

#include <cstdint>

namespace shardlab::kernels {

// row_max[r] = the first maximal logit of row r (std::max_element's comparison), or -inf when
// cols == 0.
void vocab_xent_row_max(const float* logits, float* row_max, int64_t rows, int64_t cols);

// With row_max the global maximum of each row:
// sum_exp[r] = float(sum_c exp(double(l_rc - row_max[r]))), added left to right in double;
// target_logit[r] = l_r,t with t = targets[r] - vocab_begin when 0 <= t < cols, else 0.
void vocab_xent_partials(const float* logits, const float* row_max, const int32_t* targets,
                         int64_t vocab_begin, float* sum_exp, float* target_logit, int64_t rows,
                         int64_t cols);

// With row_max, sum_exp and target_logit all-reduced: lse = row_max + log(double(sum_exp)) in
// double; probs[r, c] = float(exp(l_rc - lse)); row_loss[r] = lse - target_logit[r] (double).
// The mean loss is sum_r row_loss[r] / rows, summed by the caller in row order. row_loss is
// written for every row, also when cols == 0.
void vocab_xent_probs(const float* logits, const float* row_max, const float* sum_exp,
                      const float* target_logit, float* probs, double* row_loss, int64_t rows,
                      int64_t cols);

// dlogits = probs * inv_rows, then dlogits[r, t] -= inv_rows where this rank holds the target
// (t = targets[r] - vocab_begin in [0, cols)). dlogits may alias probs.
void vocab_xent_backward(const float* probs, const int32_t* targets, int64_t vocab_begin,
                         float* dlogits, int64_t rows, int64_t cols, float inv_rows);

// neg_best[r] = -float(vocab_begin + c) for the first column c whose logit equals row_max[r]
// (the global maximum), or -inf when there is none here: the all-reduced maximum is then minus the
// lowest global id attaining the maximum (exact in float for vocabularies below 2^24).
void vocab_xent_argmax_neg_id(const float* logits, const float* row_max, int64_t vocab_begin,
                              float* neg_best, int64_t rows, int64_t cols);

}  // namespace shardlab::kernels
