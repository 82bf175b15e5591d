#include "engine/tensor_parallel/vocab_cross_entropy.h"

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

// Per row, the largest logit over the whole vocabulary (all-reduced over tp), on the logits'
// device.
DeviceBuffer<float> global_row_max(const Tensor& logits, TpGroup tp) {
  Device& d = logits.device();
  const int64_t R = logits.dim(0), V = logits.dim(1);
  DeviceBuffer<float> mx(d, MemCategory::activations, R);
  d.vocab_xent_row_max(logits.dev(), mx.data(), R, V);  // -inf for an empty slice
  tp.all_reduce_max(d, mx.span());
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
  Device& d = logits_local.device();
  targets_.assign(targets.begin(), targets.end());
  vocab_begin_ = vocab_begin;
  if (device_targets_.device() != &d) device_targets_.bind(d, MemCategory::activations);
  device_targets_.resize(R);
  d.copy_from_host(std::span<const int32_t>(targets_), device_targets_.span());

  const DeviceBuffer<float> mx = global_row_max(logits_local, tp_);
  // sum_exp in [0, R), the target's logit in [R, 2R): one all-reduce for both.
  DeviceBuffer<float> partial(d, MemCategory::activations, 2 * R);
  d.vocab_xent_partials(logits_local.dev(), mx.data(), device_targets_.data(), vocab_begin,
                        partial.data(), partial.data() + R, R, V);
  tp_.all_reduce_sum(d, partial.span());  // only the holder of each target contributes to it

  probs_.resize(logits_local.shape(), d);
  DeviceBuffer<double> device_row_loss(d, MemCategory::activations, R);
  d.vocab_xent_probs(logits_local.dev(), mx.data(), partial.data(), partial.data() + R,
                     probs_.dev(), device_row_loss.data(), R, V);
  std::vector<double> row_loss(static_cast<size_t>(R));
  d.copy_to_host(device_row_loss.span(), std::span<double>(row_loss));
  double total = 0;
  for (const double l : row_loss) total += l;  // in row order
  return static_cast<float>(total / static_cast<double>(R));
}

void VocabParallelCrossEntropy::backward(Tensor& dlogits_local) const {
  SL_ENFORCE(!targets_.empty(), "VocabParallelCrossEntropy: backward called before forward");
  const int64_t R = probs_.dim(0), V = probs_.dim(1);
  Device& d = probs_.device();
  dlogits_local.resize(probs_.shape(), d);
  const float inv_rows = 1.0f / static_cast<float>(R);
  d.vocab_xent_backward(probs_.dev(), device_targets_.data(), vocab_begin_, dlogits_local.dev(), R,
                        V, inv_rows);
}

int64_t count_correct_vocab_parallel(const Tensor& logits_local, std::span<const int32_t> targets,
                                     int64_t vocab_begin, TpGroup tp) {
  const int64_t V = check_local_logits(logits_local, targets, vocab_begin, "count_correct");
  const int64_t R = logits_local.dim(0);
  Device& d = logits_local.device();
  const DeviceBuffer<float> mx = global_row_max(logits_local, tp);
  // The lowest global id attaining the maximum, as a maximum of negated ids (exact in float for
  // vocabularies below 2^24); ranks without it offer -inf.
  DeviceBuffer<float> neg_best(d, MemCategory::activations, R);
  d.vocab_xent_argmax_neg_id(logits_local.dev(), mx.data(), vocab_begin, neg_best.data(), R, V);
  tp.all_reduce_max(d, neg_best.span());
  std::vector<float> best(static_cast<size_t>(R));
  d.copy_to_host(neg_best.span(), std::span<float>(best));
  int64_t correct = 0;
  for (int64_t r = 0; r < R; ++r)
    correct += -best[static_cast<size_t>(r)] == static_cast<float>(targets[static_cast<size_t>(r)]);
  return correct;
}

}  // namespace shardlab
