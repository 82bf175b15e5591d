#include "kernels/cpu/vocab_xent.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace shardlab::kernels {

void vocab_xent_row_max(const float* logits, float* row_max, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* lr = logits + r * cols;
    row_max[r] =
        cols > 0 ? *std::max_element(lr, lr + cols) : -std::numeric_limits<float>::infinity();
  }
}

void vocab_xent_partials(const float* logits, const float* row_max, const int32_t* targets,
                         int64_t vocab_begin, float* sum_exp, float* target_logit, int64_t rows,
                         int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* lr = logits + r * cols;
    const float mx = row_max[r];
    double s = 0;
    // The difference is taken in float, then widened: as the engine always did.
    for (int64_t c = 0; c < cols; ++c) s += std::exp(static_cast<double>(lr[c] - mx));
    sum_exp[r] = static_cast<float>(s);
    const int64_t t = targets[r] - vocab_begin;
    target_logit[r] = t >= 0 && t < cols ? lr[t] : 0.0f;
  }
}

void vocab_xent_probs(const float* logits, const float* row_max, const float* sum_exp,
                      const float* target_logit, float* probs, double* row_loss, int64_t rows,
                      int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const double lse = row_max[r] + std::log(static_cast<double>(sum_exp[r]));
    const float* lr = logits + r * cols;
    float* pr = probs + r * cols;
    for (int64_t c = 0; c < cols; ++c) pr[c] = static_cast<float>(std::exp(lr[c] - lse));
    row_loss[r] = lse - target_logit[r];
  }
}

void vocab_xent_backward(const float* probs, const int32_t* targets, int64_t vocab_begin,
                         float* dlogits, int64_t rows, int64_t cols, float inv_rows) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* pr = probs + r * cols;
    float* dr = dlogits + r * cols;
    for (int64_t c = 0; c < cols; ++c) dr[c] = pr[c] * inv_rows;
    const int64_t t = targets[r] - vocab_begin;
    if (t >= 0 && t < cols) dr[t] -= inv_rows;
  }
}

void vocab_xent_argmax_neg_id(const float* logits, const float* row_max, int64_t vocab_begin,
                              float* neg_best, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* lr = logits + r * cols;
    const float* hit = std::find(lr, lr + cols, row_max[r]);
    neg_best[r] = hit != lr + cols ? -static_cast<float>(vocab_begin + (hit - lr))
                                   : -std::numeric_limits<float>::infinity();
  }
}

}  // namespace shardlab::kernels
