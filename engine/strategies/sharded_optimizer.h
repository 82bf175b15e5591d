// ShardedOptimizer: the 1-D strategies of the seed's IShardedOptimizer (the contract of
// AiDotNet.DistributedTraining that ShardLab keeps, sharded_optimizer_interface.h). Wraps a base
// optimizer (SGD, Adam, AdamW, RMSprop, Adagrad) and trains a model across the ranks of a
// Communicator so that the result is the same as one process training on the whole batch, while
// each rank holds only what its strategy promises:
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
#include "engine/sharding/checkpoint_view.h"
#include "engine/sharding/shard_layout.h"
#include "engine/sharding/sharded_optimizer_interface.h"
#include "engine/strategies/sharded_optimizer_base.h"
#include "engine/telemetry/sink.h"
#include "engine/topology/parallel_config.h"
#include "engine/train/lr_schedule.h"
#include "engine/train/trainer.h"
#include "engine/train/training_loop.h"

namespace shardlab {

class ShardedOptimizer : public ShardedOptimizerBase, protected BlockHooks {
 public:
  // Builds the model, the base optimizer and the strategy named by options.sharding.strategy
  // ("ddp", "zero1", "zero2", "fsdp") on `comm`. The base optimizer is `wrapped` when given (any
  // Optimizer, attached here to this rank's part; options.optimizer becomes its config()), else
  // one made from options.optimizer. Collective. Throws InvalidArgument naming the field for a
  // configuration it cannot run, including world_size, backend and timeout_s that do not
  // describe `comm` (launched_on() fills them in).
  static std::unique_ptr<ShardedOptimizer> create(Communicator& comm, const ShardedOptions& options,
                                                  std::unique_ptr<Optimizer> wrapped = nullptr);

  ~ShardedOptimizer() override;

  Model& model() { return *model_; }
  const ShardLayout& shard_layout() const { return layout_; }
  Communicator& communicator() { return comm_; }

  // step(): each rank runs its own samples `indices` of the global batch.
  // Each rank evaluates a contiguous share of the samples.
  EvalResult evaluate(const Dataset& data, int64_t max_samples) override;
  // 0 until optimize() has seen the data.
  int64_t total_steps() const { return position_.total_steps; }
  const Topology& topology() const override { return topology_; }
  const ParamLayout& full_layout() const override { return model_->layout(); }
  const PipelineTimes& pipeline_times() const override { return no_pipeline_; }

  // DDP: rank 0's state is broadcast; ZeRO and FSDP: each rank's state is checked to be attached
  // to its own shard.
  void synchronize_optimizer_state() override;

  CheckpointView checkpoint_view() override;
  CheckpointView checkpoint_maps() override;
  std::vector<std::vector<IndexRange>> comm_units() override;
  std::vector<float> gather_params() override;
  void load_model(const std::string& path) override;

 protected:
  ShardedOptimizer(Communicator& comm, const ShardedOptions& options);

  // --- what a strategy provides ---
  // Builds the model (owned storage by default) and lays out units; called once from create().
  virtual void setup();
  // Builds model_ (options_.blocks or options_.model; initialised unless its storage is external)
  // and, unless create() was given one, optimizer_ from options_.optimizer.
  void build_model_and_optimizer(ModelStorage storage, int64_t pad_multiple = 1);
  // The communicator the strategy's collectives on device memory go over: options_.device_comm
  // when set (nccl), else the rank's.
  Communicator& data_comm() const { return options_.device_comm ? *options_.device_comm : comm_; }
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
  // held_params(): the parameters this rank holds at rest (ShardedOptimizerBase), for
  // serialize() and checkpoints.
  // The same on the model's device (host copies of it cross devices in checkpoint_view()):
  // by default the model's whole parameters (DDP, ZeRO-1/2).
  virtual DeviceSpan<float> held_device_params() { return model_->device_params(); }
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
  // The same on the model's device (device-to-device copies).
  void pack_shard(DeviceSpan<const float> padded_flat, DeviceSpan<float> shard) const;
  void unpack_shard(std::span<const float> shard, std::span<float> padded_flat) const;
  // Units whose gradients are complete once backward has finished `block` (bucket readiness).
  std::vector<int> units_ready_after(int block) const;
  void wait_all(std::vector<WorkHandle>& handles);

  std::unique_ptr<Model> model_;
  ShardLayout layout_;
  Topology topology_;  // 1 x 1 x world
  int micro_ = 0;      // the micro-step in progress (0-based)
  int64_t micro_steps_ = 1;
  bool in_eval_ = false;  // evaluate() is running forwards (no backward will follow)

 private:
  StepOutcome run_step(const Dataset& data, const std::vector<int64_t>& indices, int64_t step,
                       double lr) override;
  // The rank state's own header (sharded_state.cpp gives the format): strategy, world size, rank
  // and shard layout, refused on another.
  StateFormat state_format() const override;
  void write_state_header(ByteWriter& w) override;
  void check_state_header(ByteReader& r) override;

  Batch batch_;
  Tensor dlogits_;
  PipelineTimes no_pipeline_;
};

}  // namespace shardlab
