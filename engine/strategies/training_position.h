// Where one rank's training stands (steps done, data position, early-stopping state) and the loop
// of optimize() over it, shared by ShardedOptimizer and HybridShardedOptimizer: both sample their
// slice of every global batch, run the engine's training loop (engine/train/training_loop.h) with
// their own step and evaluation, and save and restore the same TrainingProgress. Internal to
// engine/strategies and engine/hybrid.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/data/sampler.h"
#include "engine/optim/optimizer.h"
#include "engine/sharding/sharded_optimizer_interface.h"
#include "engine/train/training_loop.h"

namespace shardlab::parallel_detail {

class TrainingPosition {
 public:
  int64_t steps_done = 0;
  int64_t total_steps = 0;  // 0 until run() has seen the data
  EarlyStopState early;

  // Where training stands, with `optimizer`'s step count.
  TrainingProgress progress(const Optimizer& optimizer) const;
  // Sets the position and `optimizer`'s step count; the data position applies now or, before the
  // first run(), when the sampler is built.
  void restore(const TrainingProgress& p, Optimizer& optimizer);

  // One batch: this rank's `indices` of global step `step` (0-based) at rate `lr`.
  using StepFn =
      std::function<StepOutcome(const std::vector<int64_t>& indices, int64_t step, double lr)>;
  using EvalFn = std::function<EvalResult(const Dataset& data, int64_t max_samples)>;
  // optimize(): builds the sampler on the first call (slice `slice` of `slices` of every global
  // batch of options.train.batch_size), checks that the training set kept its size (naming
  // `who`), and runs the training loop from steps_done over `input` (max_steps, callbacks,
  // after_step). The result's params are left empty.
  TrainResult run(const OptimizeInput& input, const ShardedOptions& options, int slice, int slices,
                  const char* who, const StepFn& step, const EvalFn& evaluate);

 private:
  std::unique_ptr<Sampler> sampler_;  // built by the first run(): it needs the data's size
  SamplerState pending_{};            // a restored data position waiting for the sampler
  bool has_pending_ = false;
};

}  // namespace shardlab::parallel_detail
