// ShardedOptimizerBase: the seed's ShardedOptimizerBase (AiDotNet.DistributedTraining's base of its
// sharded optimizers), what every IShardedOptimizer of the engine shares (ShardedOptimizer's 1-D
// strategies and HybridShardedOptimizer): the communicator, the options, the wrapped base
// optimizer, where training stands (TrainingPosition), the figures of the last step, and the
// members written once from these: rank state serialisation, progress for checkpoints, model files
// and early stopping.
//
// Rank state (serialize/deserialize), little-endian, one frame for every optimizer:
//   magic (8 bytes: the optimizer's state_format()), u32 version 1,
//   <the optimizer's own header (write_state_header): what the state was written on>,
//   i64 steps done, u8 has sampler, i64 epoch, i64 index, f64 best eval, i64 evals without gain,
//   i64 evals seen, u8 early stop, floats held params, i64 n + n bytes base optimizer state,
//   u32 CRC-32 of all before.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/core/bytes.h"
#include "engine/core/memory.h"
#include "engine/optim/optimizer.h"
#include "engine/sharding/sharded_optimizer_interface.h"
#include "engine/strategies/training_position.h"

namespace shardlab {

class ShardedOptimizerBase : public IShardedOptimizer {
 public:
  int rank() const final { return comm_.rank(); }
  int world_size() const final { return comm_.size(); }
  const ShardedOptions& options() const final { return options_; }
  Optimizer& wrapped_optimizer() final { return *optimizer_; }
  bool should_early_stop() const final { return position_.early.stop; }
  int64_t steps_done() const final { return position_.steps_done; }
  // Trains this rank's data slice (its dp coordinate of topology()) through run_step().
  TrainResult optimize(const OptimizeInput& input) final;
  double step(const Dataset& data, const std::vector<int64_t>& indices, double lr) final;
  double last_grad_norm() const final { return last_grad_norm_; }
  const MemorySnapshot& memory_after_last_step() const final { return steady_memory_; }

  std::vector<uint8_t> serialize() final;
  void deserialize(std::span<const uint8_t> bytes) final;
  TrainingProgress progress() const final;
  void restore_progress(const TrainingProgress& p) final;
  // gather_params() written by rank 0 as a model file of full_layout().
  void save_model(const std::string& path) final;

 protected:
  // `wrapped` (may be null: the optimizer makes one later) replaces options.optimizer with its
  // config(). `name` is the class's, for messages.
  ShardedOptimizerBase(Communicator& comm, const ShardedOptions& options,
                       std::unique_ptr<Optimizer> wrapped, const char* name);

  // One optimizer step (0-based `step`) on this rank's `indices` at rate `lr`, ending with
  // finish_step(); publishes its phases on telemetry_ when set.
  virtual StepOutcome run_step(const Dataset& data, const std::vector<int64_t>& indices,
                               int64_t step, double lr) = 0;

  // --- the rank state's own part ---
  struct StateFormat {
    const char* magic;  // 8 bytes
    const char* what;   // in messages: "sharded state", "hybrid state"
  };
  virtual StateFormat state_format() const = 0;
  // Writes what the state was written on; check_state_header reads it back and throws
  // InvalidArgument naming what differs from this optimizer.
  virtual void write_state_header(ByteWriter& w) = 0;
  virtual void check_state_header(ByteReader& r) = 0;
  // The parameters this rank holds at rest (serialised with its state).
  virtual std::span<float> held_params() = 0;
  // Sets v.held to `held` (the held parameters on `device`, where the base optimizer is attached)
  // and v.state to the optimizer's state: the arrays themselves on the cpu device; on any other,
  // host copies (a counted copy each) that v.store puts back on the device.
  void view_held_and_state(CheckpointView& v, Device& device, DeviceSpan<float> held);

  // After a step's update: counts the step and keeps its gradient norm and the memory ledger then.
  void finish_step(double grad_norm);

  Communicator& comm_;
  ShardedOptions options_;
  std::unique_ptr<Optimizer> optimizer_;
  parallel_detail::TrainingPosition position_;
  telemetry::TelemetrySink* telemetry_ = nullptr;  // OptimizeInput::telemetry, during optimize()
  Slowdown slowdown_;  // OptimizeInput's, during optimize() (at_step(step + 1))

 private:
  const char* name_;
  double last_grad_norm_ = 0;
  MemorySnapshot steady_memory_;
};

}  // namespace shardlab
