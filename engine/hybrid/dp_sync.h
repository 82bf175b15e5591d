// DataParallelSync: the data-parallel dimension of HybridShardedOptimizer. One rank's flat local
// parameters (its stage's tensor-parallel slice) are replicated across its dp group; this class
// reduces their gradients and keeps them in sync with the strategy the job names, the same
// patterns the 1-D strategies use (engine/strategies/ddp.cpp, zero.cpp), on flat buffers cut into
// buckets (ShardLayout::buckets over the dp group):
//
//   ddp    gradients all-reduced (averaged) per bucket; the full local update on every dp rank
//   zero1  gradients all-reduced per bucket; each dp rank updates its chunk of every bucket with
//          optimizer state for that chunk only; parameters all-gathered per bucket
//   zero2  gradients reduce-scattered per bucket into a persistent shard (the caller frees the
//          full gradient buffer after reduce()); shard update; parameters all-gathered
//
// Buffers passed in are the padded local buffers (layout().padded_total() elements), on the
// device given at construction, where everything runs: collectives through DeviceCollectives, the
// norm, scaling and update as the device's kernels.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "engine/comm/device_collectives.h"
#include "engine/device/device_buffer.h"
#include "engine/optim/optimizer.h"
#include "engine/sharding/shard_layout.h"

namespace shardlab {

class DataParallelSync {
 public:
  // strategy: "ddp" | "zero1" | "zero2" (InvalidArgument naming parallel.strategy otherwise).
  // `device` holds the buffers and must outlive this.
  DataParallelSync(Communicator& dp, Device& device, std::string strategy, int64_t total,
                   int64_t bucket_elements);

  const std::string& strategy() const { return strategy_; }
  const ShardLayout& layout() const { return layout_; }
  // True for zero2: the full gradients are not needed after reduce().
  bool frees_grads() const { return strategy_ == "zero2"; }
  // Attaches `optimizer`, on the device, to what this rank updates: the whole buffer (ddp) or its
  // shard.
  void attach(Optimizer& optimizer) const;

  // Averages `grads` over the dp group (ddp, zero1: in place; zero2: into the shard). Collective.
  void reduce(DeviceSpan<float> grads);
  // Sum of g^2 over the reduced gradient elements this rank owns (ddp: all of them on dp rank 0,
  // none elsewhere; zero: its chunks), leaving out the local flat ranges in `skip` (sorted,
  // disjoint): the sum of each remaining run's Device::squared_norm, in flat order.
  double owned_square_sum(DeviceSpan<const float> grads, std::span<const IndexRange> skip);
  // Multiplies the reduced gradients this rank will use by `factor`.
  void scale(DeviceSpan<float> grads, float factor);
  // Runs the base optimizer on this rank's part and brings the parameters back in sync across the
  // dp group. Collective.
  void update(Optimizer& optimizer, DeviceSpan<float> params, DeviceSpan<const float> grads,
              double lr);

  // The parameters this rank updates, packed (ddp: all), for state checks and serialisation.
  int64_t owned_elements() const;

 private:
  void pack(DeviceSpan<const float> padded, DeviceSpan<float> shard);
  // Calls f(padded_begin, shard_offset, count) for this rank's chunk of every unit.
  template <class F>
  void for_each_chunk(F&& f) const;

  Communicator& dp_;
  Device& device_;
  DeviceCollectives collectives_;
  std::string strategy_;
  ShardLayout layout_;
  DeviceBuffer<float> grad_shard_;  // zero2
};

}  // namespace shardlab
