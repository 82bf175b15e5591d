// Softmax cross-entropy over logits cut by vocabulary columns across the tp ranks
// (Megatron-LM's vocab-parallel cross-entropy): the full logits are never gathered. Rank r holds
// columns [vocab_begin, vocab_begin + V_local) of every row. Per row, three all-reduces over the
// tp group of one float per row each: the maximum (for a stable log-sum-exp), the sum of
// exp(logit - max), and the target's logit (contributed by the rank that holds it).
//
//   loss_r = log(sum_j exp(l_rj - max_r)) + max_r - l_r,target        mean over rows
//   dL/dl_rj = (softmax_rj - [j == target_r]) / R                     local columns only
//
// Equal to SoftmaxCrossEntropy on the gathered logits up to rounding. Runs on the logits' device
// (the device's vocab_xent kernels; the per-row values cross the tp group through TpGroup's
// device all-reduce); only the per-row losses come back to the host, to be summed in row order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/device/device_buffer.h"
#include "engine/device/tensor.h"
#include "engine/tensor_parallel/tp_group.h"

namespace shardlab {

class VocabParallelCrossEntropy {
 public:
  explicit VocabParallelCrossEntropy(TpGroup tp) : tp_(tp) {}

  // logits_local [R, V_local] with R = targets.size() > 0; targets are global ids in [0, vocab)
  // (InvalidArgument otherwise, naming the row). Returns the mean loss, the same on every tp rank.
  // Collective over the tp group. Keeps what backward needs.
  float forward(const Tensor& logits_local, std::span<const int32_t> targets, int64_t vocab_begin,
                int64_t vocab);
  // dL/dlogits_local of the last forward, shape [R, V_local]. No communication.
  void backward(Tensor& dlogits_local) const;

 private:
  TpGroup tp_;
  Tensor probs_;  // local softmax columns
  std::vector<int32_t> targets_;
  DeviceBuffer<int32_t> device_targets_;  // the same on the logits' device (activations)
  int64_t vocab_begin_ = 0;
};

// Rows whose largest logit over the whole vocabulary (the lowest id on ties, as count_correct)
// is the target. The same count on every tp rank. Collective over the tp group.
int64_t count_correct_vocab_parallel(const Tensor& logits_local, std::span<const int32_t> targets,
                                     int64_t vocab_begin, TpGroup tp);

}  // namespace shardlab
