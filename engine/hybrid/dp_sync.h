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
// Buffers passed in are the padded local buffers (layout().padded_total() elements).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "engine/comm/communicator.h"
#include "engine/core/memory.h"
#include "engine/optim/optimizer.h"
#include "engine/sharding/shard_layout.h"

namespace shardlab {

class DataParallelSync {
 public:
  // strategy: "ddp" | "zero1" | "zero2" (InvalidArgument naming parallel.strategy otherwise).
  DataParallelSync(Communicator& dp, std::string strategy, int64_t total, int64_t bucket_elements);

  const std::string& strategy() const { return strategy_; }
  const ShardLayout& layout() const { return layout_; }
  // True for zero2: the full gradients are not needed after reduce().
  bool frees_grads() const { return strategy_ == "zero2"; }
  // Attaches `optimizer` to what this rank updates: the whole buffer (ddp) or its shard.
  void attach(Optimizer& optimizer) const;

  // Averages `grads` over the dp group (ddp, zero1: in place; zero2: into the shard). Collective.
  void reduce(std::span<float> grads);
  // Sum of g^2 over the reduced gradient elements this rank owns (ddp: all of them on dp rank 0,
  // none elsewhere; zero: its chunks), leaving out the local flat ranges in `skip`.
  double owned_square_sum(std::span<const float> grads, std::span<const IndexRange> skip) const;
  // Multiplies the reduced gradients this rank will use by `factor`.
  void scale(std::span<float> grads, float factor);
  // Runs the base optimizer on this rank's part and brings the parameters back in sync across the
  // dp group. Collective.
  void update(Optimizer& optimizer, std::span<float> params, std::span<const float> grads,
              double lr);

  // The parameters this rank updates, packed (ddp: all), for state checks and serialisation.
  int64_t owned_elements() const;

 private:
  void pack(std::span<const float> padded, std::span<float> shard) const;
  // Calls f(padded_begin, shard_offset, count) for this rank's chunk of every unit.
  template <class F>
  void for_each_chunk(F&& f) const;

  Communicator& dp_;
  std::string strategy_;
  ShardLayout layout_;
  Buffer grad_shard_;  // zero2
};

}  // namespace shardlab
