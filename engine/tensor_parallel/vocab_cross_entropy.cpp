#include "engine/tensor_parallel/vocab_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/core/error.h"

namespace shardlab {
namespace {

// Shape checks shared by the loss and the accuracy count; returns V_local.
int64_t check_local_logits(const Tensor& logits, std::span<const int32_t> targets,
                           int64_t vocab_begin, const char* who) {
  SL_ENFORCE(logits.rank() == 2, "{}: expected logits [rows, local classes], got shape {}", who,
             to_string(logits.shape()));
  SL_ENFORCE(logits.dim(0) == static_cast<int64_t>(targets.size()),
             "{}: {} rows of logits but {} targets", who, logits.dim(0), targets.size());
  SL_ENFORCE(vocab_begin >= 0, "{}: vocab_begin {} is negative", who, vocab_begin);
  return logits.dim(1);
}

// Per row, the largest logit over the whole vocabulary (all-reduced over tp).
std::vector<float> global_row_max(const Tensor& logits, TpGroup tp) {
  const int64_t R = logits.dim(0), V = logits.dim(1);
  std::vector<float> mx(static_cast<size_t>(R), -std::numeric_limits<float>::infinity());
  for (int64_t r = 0; r < R; ++r) {
    const float* lr = logits.data() + r * V;
    if (V > 0) mx[static_cast<size_t>(r)] = *std::max_element(lr, lr + V);
  }
  tp.all_reduce_max(mx);
  return mx;
}

}  // namespace

float VocabParallelCrossEntropy::forward(const Tensor& logits_local,
                                         std::span<const int32_t> targets, int64_t vocab_begin,
                                         int64_t vocab) {
  const char* who = "VocabParallelCrossEntropy";
  const int64_t V = check_local_logits(logits_local, targets, vocab_begin, who);
  const int64_t R = logits_local.dim(0);
  SL_ENFORCE(R > 0, "{}: no rows", who);
  SL_ENFORCE(vocab_begin + V <= vocab,
             "{}: local columns [{}, {}) are outside the vocabulary [0, {})", who, vocab_begin,
             vocab_begin + V, vocab);
  for (int64_t r = 0; r < R; ++r) {
    const int32_t t = targets[static_cast<size_t>(r)];
    SL_ENFORCE(t >= 0 && t < vocab, "{}: target {} of row {} is outside [0, {})", who, t, r, vocab);
  }
  targets_.assign(targets.begin(), targets.end());
  vocab_begin_ = vocab_begin;

  const std::vector<float> mx = global_row_max(logits_local, tp_);
  std::vector<float> sum(static_cast<size_t>(R)), target(static_cast<size_t>(R), 0.0f);
  for (int64_t r = 0; r < R; ++r) {
    const float* lr = logits_local.data() + r * V;
    double s = 0;
    for (int64_t c = 0; c < V; ++c)
      s += std::exp(static_cast<double>(lr[c] - mx[static_cast<size_t>(r)]));
    sum[static_cast<size_t>(r)] = static_cast<float>(s);
    const int64_t t = targets_[static_cast<size_t>(r)] - vocab_begin;
    if (t >= 0 && t < V) target[static_cast<size_t>(r)] = lr[t];
  }
  tp_.all_reduce_sum(sum);
  tp_.all_reduce_sum(target);  // only the holder of each target contributes

  probs_.resize(logits_local.shape());
  double total = 0;
  for (int64_t r = 0; r < R; ++r) {
    const auto i = static_cast<size_t>(r);
    const double lse = mx[i] + std::log(static_cast<double>(sum[i]));
    const float* lr = logits_local.data() + r * V;
    float* pr = probs_.data() + r * V;
    for (int64_t c = 0; c < V; ++c) pr[c] = static_cast<float>(std::exp(lr[c] - lse));
    total += lse - target[i];
  }
  return static_cast<float>(total / static_cast<double>(R));
}

void VocabParallelCrossEntropy::backward(Tensor& dlogits_local) const {
  SL_ENFORCE(!targets_.empty(), "VocabParallelCrossEntropy: backward called before forward");
  const int64_t R = probs_.dim(0), V = probs_.dim(1);
  dlogits_local.resize(probs_.shape());
  const float inv_rows = 1.0f / static_cast<float>(R);
  for (int64_t r = 0; r < R; ++r) {
    const float* pr = probs_.data() + r * V;
    float* dr = dlogits_local.data() + r * V;
    for (int64_t c = 0; c < V; ++c) dr[c] = pr[c] * inv_rows;
    const int64_t t = targets_[static_cast<size_t>(r)] - vocab_begin_;
    if (t >= 0 && t < V) dr[t] -= inv_rows;
  }
}

int64_t count_correct_vocab_parallel(const Tensor& logits_local, std::span<const int32_t> targets,
                                     int64_t vocab_begin, TpGroup tp) {
  const int64_t V = check_local_logits(logits_local, targets, vocab_begin, "count_correct");
  const int64_t R = logits_local.dim(0);
  const std::vector<float> mx = global_row_max(logits_local, tp);
  // The lowest global id attaining the maximum, as a maximum of negated ids (exact in float for
  // vocabularies below 2^24); ranks without it offer -inf.
  std::vector<float> neg_best(static_cast<size_t>(R), -std::numeric_limits<float>::infinity());
  for (int64_t r = 0; r < R; ++r) {
    const float* lr = logits_local.data() + r * V;
    const float* hit = std::find(lr, lr + V, mx[static_cast<size_t>(r)]);
    if (hit != lr + V)
      neg_best[static_cast<size_t>(r)] = -static_cast<float>(vocab_begin + (hit - lr));
  }
  tp.all_reduce_max(neg_best);
  int64_t correct = 0;
  for (int64_t r = 0; r < R; ++r)
    correct +=
        -neg_best[static_cast<size_t>(r)] == static_cast<float>(targets[static_cast<size_t>(r)]);
  return correct;
}

}  // namespace shardlab
