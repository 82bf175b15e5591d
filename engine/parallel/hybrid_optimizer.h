// HybridShardedOptimizer: the seed's HybridShardedOptimizer (an IShardedOptimizer,
// sharded_optimizer_interface.h), 3D parallelism for the GPT model.
//
//   tensor   inside each tp group: Megatron-style layers (engine/parallel/tensor/) and the
//            TensorParallelGradSync's all-reduce of replicated parameters' gradients
//   pipeline across the pp group: stages are contiguous runs of blocks (PipelineStage); the
//            dp replica's batch is cut into micro-batches by samples, activations travel forward
//            and activation gradients backward with send/recv between neighbouring stages, in the
//            order a PipelineSchedule (GPipe or 1F1B) gives; parameter gradients never travel
//   data     across each dp group: DDP, ZeRO-1 or ZeRO-2 (DataParallelSync) on this rank's slice
//
// A rank therefore holds the parameters, gradients and optimizer state of one tp slice of one
// stage (further cut by ZeRO over dp), and trains exactly like one process on the whole batch:
// the same initial parameters, the same mean loss, the same update. One step:
//
//   schedule ops (forward/backward per micro-batch, send/recv between stages, tp all-reduces)
//   -> tp: average replicated gradients -> dp: reduce -> global norm over all ranks -> clip
//   -> this rank's update -> dp: all-gather (zero1/2)
//
// Every rank times its stage per step: busy (running forward and backward ops) and idle (waiting
// for a neighbour's activations or gradients), so the measured bubble can be set beside
// (p-1)/(m+p-1). With a telemetry sink (OptimizeInput::telemetry) every rank also publishes a
// PhaseEvent per forward and backward of a micro-batch on its stage and one optimizer PhaseEvent
// per step around its update. Construct and run a rank's optimizer on one thread (the memory ledger
// is the thread's). All members that communicate are collective over the world communicator.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/core/memory.h"
#include "engine/data/dataset.h"
#include "engine/optim/optimizer.h"
#include "engine/parallel/checkpoint_view.h"
#include "engine/parallel/sharded_optimizer_interface.h"
#include "engine/parallel/topology.h"
#include "engine/parallel/training_position.h"
#include "engine/train/trainer.h"
#include "engine/train/training_loop.h"

namespace shardlab {

class HybridShardedOptimizer : public IShardedOptimizer {
 public:
  // The seed's constructor: `wrapped` (any base optimizer, attached here to this rank's part;
  // options.optimizer becomes its config()) trained over `world` as options.sharding.pp x tp x dp
  // (dp -1: world / (pp * tp)) with the data-parallel strategy options.sharding.strategy (ddp,
  // zero1 or zero2). The launch fields of options.sharding (world_size, backend, timeout_s) are
  // taken from `world`. Otherwise as create().
  HybridShardedOptimizer(Communicator& world, std::unique_ptr<Optimizer> wrapped,
                         const ShardedOptions& options);
  // Builds the topology and its groups from `world` (options.sharding's pp, tp, dp), this rank's
  // stage and slice of the GPT model (initialised as one process would), the base optimizer
  // (`wrapped`, else made from options.optimizer) and the data-parallel strategy
  // options.sharding.strategy (ddp, zero1 or zero2). Collective. Throws InvalidArgument naming
  // the field for a configuration it cannot run, including world_size, backend and timeout_s that
  // do not describe `world`.
  static std::unique_ptr<HybridShardedOptimizer> create(
      Communicator& world, const ShardedOptions& options,
      std::unique_ptr<Optimizer> wrapped = nullptr);
  ~HybridShardedOptimizer() override;

  int rank() const override { return world_.rank(); }
  int world_size() const override { return world_.size(); }
  const Topology& topology() const override { return topo_; }
  Coord coord() const { return topo_.coord(rank()); }
  const ShardedOptions& options() const override { return options_; }
  Optimizer& wrapped_optimizer() override { return *optimizer_; }
  // This rank's parameters: its stage's blocks, tp-sliced (full model names, local shapes).
  const ParamLayout& local_layout() const;
  const ParamLayout& full_layout() const override;

  // The result's params are the full model's parameters, reassembled on every rank.
  TrainResult optimize(const OptimizeInput& input) override;
  // `indices` is this dp replica's slice; its pipeline runs parallel.micro_batches of them.
  double step(const Dataset& data, const std::vector<int64_t>& indices, double lr) override;
  // The dp replicas share the samples and each runs them through its pipeline.
  EvalResult evaluate(const Dataset& data, int64_t max_samples) override;
  bool should_early_stop() const override;
  int64_t steps_done() const override { return position_.steps_done; }
  double last_grad_norm() const override { return last_grad_norm_; }
  const MemorySnapshot& memory_after_last_step() const override { return steady_memory_; }
  const PipelineTimes& pipeline_times() const override { return times_; }

  // DDP: broadcasts the optimizer state from dp rank 0 over the dp group; ZeRO: checks each rank's
  // state is attached to its own shard.
  void synchronize_optimizer_state() override;

  // The state also records the topology, coordinate, strategy and local layout, and is refused
  // on another (hybrid_state.cpp gives the format).
  std::vector<uint8_t> serialize() override;
  void deserialize(std::span<const uint8_t> bytes) override;

  // The global indices of this rank's slice (tp_slicing.h) of its stage, cut by the dp strategy.
  CheckpointView checkpoint_view() override;
  TrainingProgress progress() const override;
  void restore_progress(const TrainingProgress& p) override;

  // The full model's flat parameters, reassembled from every stage and tp slice, on every rank.
  std::vector<float> gather_params() override;
  void save_model(const std::string& path) override;
  void load_model(const std::string& path) override;

 private:
  struct Impl;
  HybridShardedOptimizer(Communicator& world, const ShardedOptions& options,
                         std::unique_ptr<Optimizer> wrapped);

  StepOutcome run_step(const Dataset& data, const std::vector<int64_t>& indices, int64_t step,
                       double lr);

  Communicator& world_;
  ShardedOptions options_;
  Topology topo_;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<Optimizer> optimizer_;
  parallel_detail::TrainingPosition position_;
  double last_grad_norm_ = 0;
  MemorySnapshot steady_memory_;
  PipelineTimes times_;
};

}  // namespace shardlab
