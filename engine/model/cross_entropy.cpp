#include "engine/model/cross_entropy.h"

#include <algorithm>

#include "engine/core/error.h"
#include "kernels/cpu/softmax_xent.h"

namespace shardlab {
namespace {

void check_logits(const Tensor& logits, std::span<const int32_t> targets, const char* who) {
  SL_ENFORCE(logits.rank() == 2, "{}: expected logits [rows, classes], got shape {}", who,
             to_string(logits.shape()));
  SL_ENFORCE(logits.dim(0) == static_cast<int64_t>(targets.size()),
             "{}: {} rows of logits but {} targets", who, logits.dim(0), targets.size());
}

}  // namespace

float SoftmaxCrossEntropy::forward(const Tensor& logits, std::span<const int32_t> targets) {
  check_logits(logits, targets, "SoftmaxCrossEntropy");
  const int64_t R = logits.dim(0), C = logits.dim(1);
  SL_ENFORCE(R > 0 && C > 0, "SoftmaxCrossEntropy: empty logits {}", to_string(logits.shape()));
  for (int64_t r = 0; r < R; ++r) {
    const int32_t t = targets[static_cast<size_t>(r)];
    SL_ENFORCE(t >= 0 && t < C, "SoftmaxCrossEntropy: target {} of row {} is outside [0, {})", t, r,
               C);
  }
  Device& d = logits.device();
  targets_.assign(targets.begin(), targets.end());
  if (device_targets_.device() != &d) {
    device_targets_.bind(d, MemCategory::activations);
    device_row_loss_.bind(d, MemCategory::activations);
  }
  device_targets_.resize(R);
  device_row_loss_.resize(R);
  d.copy_from_host(std::span<const int32_t>(targets_), device_targets_.span());
  probs_.resize(logits.shape(), d);
  d.softmax_xent_forward(logits.dev(), device_targets_.data(), probs_.dev(),
                         device_row_loss_.data(), /*row_correct=*/{}, R, C);
  row_loss_.resize(static_cast<size_t>(R));
  d.copy_to_host(device_row_loss_.span(), std::span<double>(row_loss_));
  double total = 0;
  for (int64_t r = 0; r < R; ++r) total += row_loss_[static_cast<size_t>(r)];
  return static_cast<float>(total / static_cast<double>(R));
}

void SoftmaxCrossEntropy::backward(Tensor& dlogits) const {
  SL_ENFORCE(!targets_.empty(), "SoftmaxCrossEntropy: backward called before forward");
  const int64_t R = probs_.dim(0), C = probs_.dim(1);
  Device& d = probs_.device();
  dlogits.resize(probs_.shape(), d);
  const float inv_rows = 1.0f / static_cast<float>(R);
  d.softmax_xent_backward(probs_.dev(), device_targets_.data(), dlogits.dev(), R, C, inv_rows);
}

int64_t count_correct(const Tensor& logits, std::span<const int32_t> targets) {
  check_logits(logits, targets, "count_correct");
  const int64_t R = logits.dim(0), C = logits.dim(1);
  const std::vector<float> host = logits.to_host();
  int64_t correct = 0;
  for (int64_t r = 0; r < R; ++r) {
    const float* lr = host.data() + r * C;
    const int64_t best = std::max_element(lr, lr + C) - lr;
    correct += best == targets[static_cast<size_t>(r)];
  }
  return correct;
}

}  // namespace shardlab
