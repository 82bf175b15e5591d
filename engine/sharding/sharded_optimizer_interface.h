// IShardedOptimizer: the seed's IShardedOptimizer contract (the seed: the original
// AiDotNet.DistributedTraining sharded-optimizer API, whose contract ShardLab keeps), implemented
// by every sharded optimizer of the engine: the 1-D strategies (ShardedOptimizer: ddp, zero1,
// zero2, fsdp) and the 3D one (HybridShardedOptimizer: pp x tp x dp). Callers that run, checkpoint
// or report on a rank (rank_runner.h, rank_checkpoint.h) are written once against this interface.
//
// The seed's named types (FSDPOptimizer, ZeRO2Optimizer, TensorParallelOptimizer,
// HybridShardedOptimizer, each built from a base optimizer instance plus a configuration) are in
// engine/run/seed_optimizers.h, with make_sharded_optimizer(), which picks the implementation for
// a job (sharded_options_from_job.h turns a job file into ShardedOptions).
//
// Every member that communicates is collective: every rank of the communicator makes the same
// calls in the same order, with the same configuration. Memory is counted by the ledger bound to
// the calling thread (engine/core/memory.h), so construct and run a rank's optimizer on one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/core/memory.h"
#include "engine/core/param_layout.h"
#include "engine/data/dataset.h"
#include "engine/device/device.h"
#include "engine/model/layer.h"
#include "engine/model/model_config.h"
#include "engine/optim/optimizer.h"
#include "engine/sharding/checkpoint_view.h"
#include "engine/telemetry/sink.h"
#include "engine/topology/parallel_config.h"
#include "engine/topology/topology.h"
#include "engine/train/slowdown.h"
#include "engine/train/trainer.h"

namespace shardlab {

// A model's blocks, built fresh on every call (each rank builds its own model, with the storage
// its strategy needs: owned, padded, or external for FSDP). Block i's parameters are initialised
// from Rng::derive(model.seed, i), as for the engine's own models (engine/model/model.h).
using BlockFactory = std::function<std::vector<std::unique_ptr<Layer>>()>;

// Everything a rank needs besides the communicator and the data (the seed's sharding
// configuration, with the model, the base optimizer and the training settings).
struct ShardedOptions {
  ParallelConfig sharding;  // strategy, buckets, overlap, FSDP's keep-params, pp x tp x dp
  // The model: the engine's MLP or GPT described by model.kind, or, when `blocks` is set, the
  // caller's own blocks (model.kind then only names it, e.g. in checkpoint manifests; model.seed
  // still seeds the initialisation). Custom blocks are for the 1-D strategies only: tensor and
  // pipeline parallelism slice the GPT model.
  ModelConfig model;
  BlockFactory blocks;
  // The base optimizer made from this config, unless the caller passes an instance (then this
  // becomes a copy of the instance's config()).
  OptimizerConfig optimizer;
  TrainConfig train;  // steps, global batch, accumulation, clipping, schedule, early stopping
  // Where this rank's model lives (null: the host device); it must outlive the optimizer. Every
  // strategy and layout runs on any device.
  Device* device = nullptr;
  // A communicator over the same ranks that moves `device`'s memory itself (nccl, one GPU per
  // rank), or null. When set, the 1-D strategies' collectives on device memory (gradient buckets,
  // shards, gathers) go over it, without staging; control values (norms, losses, flags, checkpoint
  // agreement) stay on the rank's communicator. It must outlive the optimizer.
  Communicator* device_comm = nullptr;
};

// `options` with the launch fields (parallel.world_size, backend, timeout_s) describing `comm`:
// for callers who build an optimizer on a communicator they made themselves (seed_optimizers.h).
ShardedOptions launched_on(const Communicator& comm, ShardedOptions options);

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
  // A rank slowed on purpose: time added to every micro-batch's forward on this rank, inside its
  // forward phase, from a given step on (engine/train/slowdown.h, RankRunOptions::slow_ranks).
  // Zero unless asked for.
  Slowdown slowdown;
  // Called on every rank after each step (LoopSpec::after_step: done, last), at the same point on
  // every rank, so it may be collective: rank_runner.h saves checkpoints there. May be null.
  std::function<void(int64_t done, bool last)> after_step;
};

// Seconds a pipeline stage spent in the pipeline part of its steps (zero without pipelining).
struct PipelineTimes {
  double busy = 0;  // running forward and backward ops (tensor-parallel all-reduces included)
  double idle = 0;  // waiting to receive from a neighbouring stage
  int64_t steps = 0;
  // idle / (busy + idle): this stage's bubble fraction.
  double bubble() const { return busy + idle > 0 ? idle / (busy + idle) : 0.0; }
};

class IShardedOptimizer {
 public:
  virtual ~IShardedOptimizer() = default;

  // --- the seed's contract ---
  virtual int rank() const = 0;  // in the world communicator
  virtual int world_size() const = 0;
  const ParallelConfig& sharding_configuration() const { return options().sharding; }
  virtual const ShardedOptions& options() const = 0;
  // The base optimizer, attached to the part of the parameters this rank updates.
  virtual Optimizer& wrapped_optimizer() = 0;
  // Makes the optimizer state consistent across ranks: replicated state (DDP) is broadcast from
  // the first replica, sharded state is checked to be attached to this rank's shard, with every
  // rank at the same optimizer step. Collective.
  virtual void synchronize_optimizer_state() = 0;
  // Trains until the configured steps/epochs are done, early stopping fires, input.max_steps more
  // steps have run, or input.callbacks.should_stop says stop (which must answer alike on every
  // rank). The result's params are the full model's parameters, on every rank. Collective.
  virtual TrainResult optimize(const OptimizeInput& input) = 0;
  // This rank's training state as bytes, in its own layout: what it holds (checked on load), the
  // step, data position, early-stopping state, its parameters and its base optimizer's state.
  // deserialize() refuses bytes written by another strategy, layout, rank or model with
  // InvalidArgument naming what differs (FormatError for damaged bytes), and changes nothing
  // then. To move state to another layout use checkpoints (rank_checkpoint.h), which reshard.
  virtual std::vector<uint8_t> serialize() = 0;
  virtual void deserialize(std::span<const uint8_t> bytes) = 0;
  // Writes the full parameters as a model file (rank 0 writes; collective). load_model reads one
  // on every rank and keeps this rank's part; the file must match the model's layout.
  virtual void save_model(const std::string& path) = 0;
  virtual void load_model(const std::string& path) = 0;
  // True once an evaluation has gone train.early_stopping.patience evaluations without gain.
  virtual bool should_early_stop() const = 0;

  // --- what runners, checkpoints and benchmarks need besides ---
  // One optimizer step on this rank's (replica's) slice `indices` of a global batch of
  // train.batch_size samples at rate `lr`; returns the global mean loss. Collective.
  virtual double step(const Dataset& data, const std::vector<int64_t>& indices, double lr) = 0;
  // Mean loss and accuracy over `max_samples` evenly spaced samples of `data` (0: all), shared
  // out over the ranks; the same figures on every rank. Collective.
  virtual EvalResult evaluate(const Dataset& data, int64_t max_samples) = 0;
  virtual int64_t steps_done() const = 0;
  virtual double last_grad_norm() const = 0;
  // This rank's memory ledger right after the last optimizer step (the steady state the planner
  // predicts), or all zeros when no ledger is bound.
  virtual const MemorySnapshot& memory_after_last_step() const = 0;
  // pp x tp x dp of the job (1 x 1 x world for the 1-D strategies).
  virtual const Topology& topology() const = 0;
  // The whole model's parameter layout (what model files and checkpoints index).
  virtual const ParamLayout& full_layout() const = 0;
  // This rank's pipeline busy/idle seconds (zeros for the 1-D strategies).
  virtual const PipelineTimes& pipeline_times() const = 0;

  // For checkpoints in the model's global indices (rank_checkpoint.h; a checkpoint loads into any
  // strategy and layout): this rank's parameters and optimizer state with their global indices,
  // and where training stands. restore_progress() sets the step count, data position,
  // early-stopping state and the base optimizer's step count (the same on every rank).
  virtual CheckpointView checkpoint_view() = 0;
  // The view's maps alone (held, owned, written) and its optimizer, with no parameters or state:
  // what the holdings need, without copying a device rank's memory to the host.
  virtual CheckpointView checkpoint_maps() { return checkpoint_view(); }
  // The units this rank's data-parallel collectives move (its ShardLayout: the gradient buckets
  // of DDP and ZeRO, the blocks of FSDP), each as ranges of the full model's flat indices, sorted
  // and merged, padding left out. A CommSubject's unit (comm_record.h) indexes this list.
  virtual std::vector<std::vector<IndexRange>> comm_units() = 0;
  virtual TrainingProgress progress() const = 0;
  virtual void restore_progress(const TrainingProgress& p) = 0;

  // The full model's flat parameters, the same on every rank. Collective.
  virtual std::vector<float> gather_params() = 0;
};

}  // namespace shardlab
