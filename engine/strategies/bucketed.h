// BucketedOptimizer: the gradient-bucket machinery DDP, ZeRO-1 and ZeRO-2 share (internal).
//
// The flat gradient buffer is cut into buckets (ShardLayout units). With overlap on, a bucket's
// collective is launched from the backward hook of the block that completes it (backward runs
// last block first, so the last buckets go first) and runs while earlier blocks compute; with
// overlap off every bucket is launched after backward. Gradients are accumulated locally over a
// step's micro-steps and reduced once, at the last one (PyTorch DDP's no_sync).
#pragma once

#include <vector>

#include "engine/strategies/sharded_optimizer.h"

namespace shardlab::parallel_detail {

class BucketedOptimizer : public ShardedOptimizer {
 protected:
  using ShardedOptimizer::ShardedOptimizer;

  // Starts the collective that reduces bucket `unit`'s gradients.
  virtual WorkHandle launch_bucket(int unit) = 0;
  // After every bucket of the step has been reduced.
  virtual void buckets_reduced() {}

  void begin_step() override;
  void after_backward(int block) override;
  void end_micro_step(bool last) override;
  // Drops the handles of collectives still in flight (after a failed step), which waits, bounded,
  // until they no longer touch their buffers. Strategies whose buffers are collective targets call
  // it from their destructor, before those buffers go.
  void drop_pending();

 private:
  void launch(int unit);

  std::vector<WorkHandle> pending_;
  std::vector<char> launched_;
};

}  // namespace shardlab::parallel_detail
