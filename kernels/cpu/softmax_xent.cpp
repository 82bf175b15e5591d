#include "kernels/cpu/softmax_xent.h"

#include <algorithm>
#include <cmath>

namespace shardlab::kernels {

void softmax_xent_forward(const float* logits, const int32_t* targets, float* probs,
                          double* row_loss, int32_t* row_correct, int64_t rows, int64_t classes) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* lr = logits + r * classes;
    float* pr = probs + r * classes;
    const float* top = std::max_element(lr, lr + classes);  // the first maximal logit
    const float mx = *top;
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(lr[c] - mx));
    const double lse = mx + std::log(sum);
    for (int64_t c = 0; c < classes; ++c) pr[c] = static_cast<float>(std::exp(lr[c] - lse));
    const int32_t t = targets[r];
    row_loss[r] = lse - lr[t];
    if (row_correct) row_correct[r] = (top - lr) == t ? 1 : 0;
  }
}

void softmax_xent_backward(const float* probs, const int32_t* targets, float* dlogits, int64_t rows,
                           int64_t classes, float scale) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* pr = probs + r * classes;
    float* dr = dlogits + r * classes;
    for (int64_t c = 0; c < classes; ++c) dr[c] = pr[c] * scale;
    dr[targets[r]] -= scale;
  }
}

}  // namespace shardlab::kernels
