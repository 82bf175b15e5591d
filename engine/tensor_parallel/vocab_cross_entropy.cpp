#include "engine/tensor_parallel/vocab_cross_entropy.h"

#include "engine/core/error.h"
#include "kernels/cpu/vocab_xent.h"

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
  std::vector<float> mx(static_cast<size_t>(R));
  kernels::vocab_xent_row_max(logits.data(), mx.data(), R, V);  // -inf for an empty slice
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
  std::vector<float> sum(static_cast<size_t>(R)), target(static_cast<size_t>(R));
  kernels::vocab_xent_partials(logits_local.data(), mx.data(), targets_.data(), vocab_begin,
                               sum.data(), target.data(), R, V);
  tp_.all_reduce_sum(sum);
  tp_.all_reduce_sum(target);  // only the holder of each target contributes

  probs_.resize(logits_local.shape());
  std::vector<double> row_loss(static_cast<size_t>(R));
  kernels::vocab_xent_probs(logits_local.data(), mx.data(), sum.data(), target.data(),
                            probs_.data(), row_loss.data(), R, V);
  double total = 0;
  for (const double l : row_loss) total += l;  // in row order
  return static_cast<float>(total / static_cast<double>(R));
}

void VocabParallelCrossEntropy::backward(Tensor& dlogits_local) const {
  SL_ENFORCE(!targets_.empty(), "VocabParallelCrossEntropy: backward called before forward");
  const int64_t R = probs_.dim(0), V = probs_.dim(1);
  dlogits_local.resize(probs_.shape());
  const float inv_rows = 1.0f / static_cast<float>(R);
  kernels::vocab_xent_backward(probs_.data(), targets_.data(), vocab_begin_, dlogits_local.data(),
                               R, V, inv_rows);
}

int64_t count_correct_vocab_parallel(const Tensor& logits_local, std::span<const int32_t> targets,
                                     int64_t vocab_begin, TpGroup tp) {
  const int64_t V = check_local_logits(logits_local, targets, vocab_begin, "count_correct");
  const int64_t R = logits_local.dim(0);
  const std::vector<float> mx = global_row_max(logits_local, tp);
  // The lowest global id attaining the maximum, as a maximum of negated ids (exact in float for
  // vocabularies below 2^24); ranks without it offer -inf.
  std::vector<float> neg_best(static_cast<size_t>(R));
  kernels::vocab_xent_argmax_neg_id(logits_local.data(), mx.data(), vocab_begin, neg_best.data(), R,
                                    V);
  tp.all_reduce_max(neg_best);
  int64_t correct = 0;
  for (int64_t r = 0; r < R; ++r)
    correct +=
        -neg_best[static_cast<size_t>(r)] == static_cast<float>(targets[static_cast<size_t>(r)]);
  return correct;
}

}  // namespace shardlab
