// TensorParallelGradSync: the tensor-parallel dimension's part of a step inside
// HybridShardedOptimizer (the user-facing TensorParallelOptimizer of the seed's API,
// AiDotNet.DistributedTraining, is in seed_optimizers.h). Parameters cut across the tp group
// (tp_slicing.h) have one owner per element and need no gradient exchange; parameters replicated
// across it (LayerNorms, row-parallel biases, the position embedding) get gradients on every tp
// rank, which are all-reduced (averaged) within the group before anyone steps, so every replica
// takes the same update.
// No rank runs a local optimizer step before this synchronisation: HybridShardedOptimizer calls
// synchronize_grads() first, then the data-parallel reduction, then the update of this rank's
// own slice.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/core/param_layout.h"
#include "engine/device/device.h"
#include "engine/tensor_parallel/tp_group.h"
#include "engine/tensor_parallel/tp_slicing.h"

namespace shardlab {

class TensorParallelGradSync {
 public:
  TensorParallelGradSync(TpGroup tp, const ParamLayout& local,
                         const std::vector<ParamSlice>& slices);

  // Averages the replicated parameters' gradients over the tp group, in place in the flat local
  // gradients on `device` (packed on the device, one all-reduce through DeviceCollectives).
  // Collective over the tp group.
  void synchronize_grads(Device& device, DeviceSpan<float> grads);
  // The local flat ranges this rank leaves out of the global gradient norm so that every element
  // is counted once: the replicated parameters on every tp rank but the first.
  std::span<const IndexRange> not_counted() const;
  int64_t replicated_elements() const { return replicated_; }

 private:
  TpGroup tp_;
  std::vector<IndexRange> replicated_ranges_;  // local flat ranges of replicated parameters
  int64_t replicated_ = 0;
};

}  // namespace shardlab
