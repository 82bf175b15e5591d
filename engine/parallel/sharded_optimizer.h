// ShardedOptimizer: the seed's IShardedOptimizer. Wraps a base optimizer (SGD, Adam, AdamW,
// RMSprop, Adagrad) and trains a model across the ranks of a Communicator so that the result is
// the same as one process training on the whole batch, while each rank holds only what its
// strategy promises:
//
//   ddp    gradients all-reduced (averaged) per bucket; every rank runs the full update
//   zero1  gradients all-reduced per bucket; each rank updates its 1/N shard with optimizer state
//          for that shard only; parameters all-gathered per bucket
//   zero2  gradients reduce-scattered per bucket, so each rank keeps only its gradient shard (the
//          full gradient buffer is freed after backward); shard update; parameters all-gathered
//   fsdp   parameters sharded at rest; each block all-gathered just before its forward and again
//          before its backward and freed after; its gradients reduce-scattered right after its
//          backward (ZeRO-3)
//
// All strategies share this base: the training loop (optimize), micro-batch accumulation, global
// gradient-norm clipping (each rank sums the squares of the gradient elements it owns; one
// all-reduce gives the global norm), the learning-rate schedule, evaluation across ranks, early
// stopping, serialisation and model files. A strategy adds only its communication pattern by
// overriding the protected hooks below.
//
// Every rank of the communicator must make the same calls in the same order (they are
// collective), with the same configuration. Memory is counted by the ledger bound to the calling
// thread (engine/core/memory.h), so construct and run a rank's optimizer on one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/core/memory.h"
#include "engine/data/batch.h"
#include "engine/data/dataset.h"
#include "engine/data/sampler.h"
#include "engine/job/job_spec.h"
#include "engine/model/model.h"
#include "engine/model/model_file.h"
#include "engine/optim/optimizer.h"
#include "engine/parallel/checkpoint_view.h"
#include "engine/parallel/parallel_config.h"
#include "engine/parallel/shard_layout.h"
#include "engine/telemetry/sink.h"
#include "engine/train/lr_schedule.h"
#include "engine/train/trainer.h"
#include "engine/train/training_loop.h"

namespace shardlab {

// Everything a rank needs besides the communicator and the data (options()).
struct ShardedOptions {
  ParallelConfig sharding;  // strategy, buckets, overlap, FSDP's keep-params
  ModelConfig model;        // built by the optimizer (FSDP builds it sharded)
  OptimizerConfig optimizer;
  TrainConfig train;  // steps, global batch, accumulation, clipping, schedule, early stopping
};

// A job's parallel, model, optimizer and train sections as ShardedOptions (for ShardedOptimizer
// and HybridShardedOptimizer alike).
ShardedOptions sharded_options(const JobSpec& job);

// What optimize() works on. train and eval stay owned by the caller (ranks running as threads
// may share one Dataset: gather() is const).
struct OptimizeInput {
  const Dataset* train = nullptr;
  const Dataset* eval = nullptr;  // may be null
  TrainerCallbacks callbacks;     // called on every rank (filter on rank() to print once)
  // Stop after this many more optimizer steps (0: run to the end). The schedule and the data
  // order are those of the whole run, so a run cut into pieces equals an uninterrupted one.
  int64_t max_steps = 0;
  // Where this rank's compute-phase events go during optimize(); may be null (then no clock is
  // read for them). Every step publishes a PhaseEvent forward and backward for each of its
  // micro-batches (micro_batch = its index within the step; stage 0 for ShardedOptimizer, the
  // rank's pipeline stage for HybridShardedOptimizer) and one PhaseEvent optimizer
  // (micro_batch -1) around the parameter update: the base optimizer on this rank's part and, for
  // ZeRO, the parameter all-gather that follows it; the gradient reduction before it is not part
  // of any phase (its collectives publish their own events). Step, memory, evaluation and
  // collective events are published by the caller (rank_runner.h, step_telemetry.h).
  telemetry::TelemetrySink* telemetry = nullptr;
  // Called on every rank after each step (LoopSpec::after_step: done, last), at the same point on
  // every rank, so it may be collective: rank_runner.h saves checkpoints there. May be null.
  std::function<void(int64_t done, bool last)> after_step;
};

class ShardedOptimizer : protected BlockHooks {
 public:
  // Builds the model, the wrapped base optimizer and the strategy named by
  // options.sharding.strategy ("ddp", "zero1", "zero2", "fsdp") on `comm`. Collective.
  // Throws InvalidArgument naming the field for a configuration it cannot run, including
  // world_size, backend and timeout_s that do not describe `comm`.
  static std::unique_ptr<ShardedOptimizer> create(Communicator& comm,
                                                  const ShardedOptions& options);

  ~ShardedOptimizer() override;

  int rank() const { return comm_.rank(); }
  int world_size() const { return comm_.size(); }
  const ParallelConfig& sharding_configuration() const { return options_.sharding; }
  const ShardedOptions& options() const { return options_; }
  Optimizer& wrapped_optimizer() { return *optimizer_; }
  Model& model() { return *model_; }
  const ShardLayout& shard_layout() const { return layout_; }
  Communicator& communicator() { return comm_; }

  // Trains until the configured steps/epochs are done, early stopping fires,
  // input.max_steps more steps have run, or input.callbacks.should_stop says stop (which must
  // answer alike on every rank). Collective. The result's params are the full
  // parameters (gathered on every rank) at the end.
  TrainResult optimize(const OptimizeInput& input);
  // One optimizer step on this rank's slice `indices` of a global batch of train.batch_size
  // samples; returns the global mean loss of the step. Collective.
  double step(const Dataset& data, const std::vector<int64_t>& indices, double lr);
  // Mean loss and accuracy over `max_samples` evenly spaced samples of `data` (0: all), each rank
  // evaluating a contiguous share; the same figures on every rank. Collective.
  EvalResult evaluate(const Dataset& data, int64_t max_samples);
  // True once an evaluation has gone train.early_stopping.patience evaluations without gain.
  bool should_early_stop() const;
  int64_t steps_done() const { return steps_done_; }
  int64_t total_steps() const { return total_steps_; }  // 0 until optimize() has seen the data
  double last_grad_norm() const { return last_grad_norm_; }
  // This rank's memory ledger right after the last optimizer step (the steady state the planner
  // predicts), or all zeros when no ledger is bound.
  const MemorySnapshot& memory_after_last_step() const { return steady_memory_; }

  // Makes the optimizer state consistent across ranks: replicated state (DDP) is broadcast from
  // rank 0, sharded state is checked to be attached to this rank's shard. Collective.
  void synchronize_optimizer_state();

  // This rank's training state as bytes: strategy, world size, rank and layout (checked on
  // load), step, data position, early-stopping state, the parameters this rank holds and the
  // base optimizer's state. deserialize() refuses bytes written by another strategy, world size,
  // rank or model with InvalidArgument naming what differs, and changes nothing then.
  std::vector<uint8_t> serialize();
  void deserialize(std::span<const uint8_t> bytes);

  // For checkpoints in the model's global indices (rank_checkpoint.h; a checkpoint loads into any
  // strategy): this rank's parameters and optimizer state with their global indices, and where
  // training stands. restore_progress() sets the step count, data position, early-stopping state
  // and the base optimizer's step count (the same on every rank).
  CheckpointView checkpoint_view();
  TrainingProgress progress() const;
  void restore_progress(const TrainingProgress& p);

  // The full flat parameters, the same on every rank. Collective.
  std::vector<float> gather_params();
  // Writes the full parameters as a model file (rank 0 writes; collective). load_model reads one
  // on every rank and keeps this rank's part; the file must match the model's layout.
  void save_model(const std::string& path);
  void load_model(const std::string& path);

 protected:
  ShardedOptimizer(Communicator& comm, const ShardedOptions& options);

  // --- what a strategy provides ---
  // Builds the model (owned storage by default) and lays out units; called once from create().
  virtual void setup();
  // Before the first micro-step of a step (e.g. allocate gradient buffers).
  virtual void begin_step() {}
  // After each micro-step's backward; `last` is the step's final micro-step. Gradients must be
  // reduced (and, for sharded strategies, in this rank's shard) once the last one returns.
  virtual void end_micro_step(bool last) = 0;
  // The reduced gradient elements this rank owns (its chunks), for the global norm.
  virtual double owned_grad_square_sum() = 0;
  // Scales the reduced gradients this rank will use by `factor` (clipping).
  virtual void scale_grads(float factor) = 0;
  // Runs the base optimizer on this rank's part at `lr` and brings parameters back in sync.
  virtual void update(double lr) = 0;
  // The parameters this rank holds at rest, for serialize() and load_model().
  virtual std::span<float> held_params() = 0;
  // Writes this rank's chunk of every unit of `full` (the whole flat parameters) into the held
  // parameters.
  virtual void load_full_params(std::span<const float> full) = 0;
  // Fills `full` (total() elements, every rank) with the current parameters. Collective.
  virtual void gather_full_params(std::span<float> full) = 0;

  // --- shared helpers for strategies ---
  // This rank's chunk of unit u of a padded flat buffer -> local shard offsets.
  IndexRange local_chunk(int unit) const;
  // Copies this rank's chunks of every unit out of a padded flat buffer into a shard buffer and
  // back.
  void pack_shard(std::span<const float> padded_flat, std::span<float> shard) const;
  void unpack_shard(std::span<const float> shard, std::span<float> padded_flat) const;
  // Units whose gradients are complete once backward has finished `block` (bucket readiness).
  std::vector<int> units_ready_after(int block) const;
  void wait_all(std::vector<WorkHandle>& handles);

  Communicator& comm_;
  ShardedOptions options_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> optimizer_;
  ShardLayout layout_;
  int micro_ = 0;  // the micro-step in progress (0-based)
  int64_t micro_steps_ = 1;
  bool in_eval_ = false;  // evaluate() is running forwards (no backward will follow)

 private:
  void ensure_sampler(const Dataset& train);
  StepOutcome run_step(const Dataset& data, const std::vector<int64_t>& indices, int64_t step,
                       double lr);

  Batch batch_;
  Tensor dlogits_;
  std::unique_ptr<Sampler> sampler_;
  SamplerState pending_sampler_{};
  bool has_pending_sampler_ = false;
  int64_t steps_done_ = 0;
  int64_t total_steps_ = 0;
  telemetry::TelemetrySink* telemetry_ = nullptr;  // OptimizeInput::telemetry, during optimize()
  EarlyStopState early_;
  MemorySnapshot steady_memory_;
  double last_grad_norm_ = 0;
};

}  // namespace shardlab
