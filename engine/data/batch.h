// Batch: what a model consumes in one forward pass.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/device/tensor.h"

namespace shardlab {

// input: [B, features] floats for the MLP, or [B, T] token ids (stored as exact floats) for the
// GPT model. targets: one class index per output row (B for the MLP, B*T for the GPT model).
struct Batch {
  Tensor input;
  std::vector<int32_t> targets;
  int64_t samples() const { return input.rank() > 0 ? input.dim(0) : 0; }
};

}  // namespace shardlab
