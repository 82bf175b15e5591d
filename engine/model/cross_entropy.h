// Softmax cross-entropy, the training loss for both models (class logits for the MLP, next-token
// logits for the GPT model). It is not a Layer: it maps logits and targets to one number.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/device/tensor.h"

namespace shardlab {

class SoftmaxCrossEntropy {
 public:
  // Mean over rows of -log softmax(logits[r])[targets[r]], computed through a max-shifted
  // log-sum-exp so large logits do not overflow. logits: [R, C] with R = targets.size() > 0.
  // Throws InvalidArgument for a target outside [0, C). Keeps the softmax for backward.
  float forward(const Tensor& logits, std::span<const int32_t> targets);

  // d(mean loss)/d(logits) of the last forward: (softmax - onehot(target)) / R, shape [R, C].
  void backward(Tensor& dlogits) const;

 private:
  Tensor probs_;
  std::vector<int32_t> targets_;             // of the last forward, on the host
  DeviceBuffer<int32_t> device_targets_;     // the same on the logits' device (activations)
  DeviceBuffer<double> device_row_loss_;     // per-row loss of the last forward (activations)
  std::vector<double> row_loss_;             // the same, copied to the host to be summed
};

// Number of rows whose largest logit (the first one, on ties) is at the target class (the logits
// are copied to the host for it: evaluation only).
int64_t count_correct(const Tensor& logits, std::span<const int32_t> targets);

}  // namespace shardlab
