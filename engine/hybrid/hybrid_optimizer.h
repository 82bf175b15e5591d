// HybridShardedOptimizer: the HybridShardedOptimizer of the seed (AiDotNet.DistributedTraining's
// sharded-optimizer API; an IShardedOptimizer, sharded_optimizer_interface.h), 3D parallelism for
// the GPT model.
//
//   tensor   inside each tp group: Megatron-style layers (engine/tensor_parallel/) and the
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
#include "engine/sharding/checkpoint_view.h"
#include "engine/strategies/sharded_optimizer_base.h"
#include "engine/sharding/sharded_optimizer_interface.h"
#include "engine/topology/topology.h"
#include "engine/train/trainer.h"
#include "engine/train/training_loop.h"

namespace shardlab {

class HybridShardedOptimizer : public ShardedOptimizerBase {
 public:
  // The seed API's constructor (a base optimizer instance plus a configuration): `wrapped` (any
  // base optimizer, attached here to this rank's part; options.optimizer becomes its config())
  // trained over `world` as options.sharding.pp x tp x dp (dp -1: world / (pp * tp)) with the
  // data-parallel strategy options.sharding.strategy (ddp, zero1 or zero2). The launch fields of
  // options.sharding (world_size, backend, timeout_s) are taken from `world`. Otherwise as
  // create().
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

  const Topology& topology() const override { return topo_; }
  Coord coord() const { return topo_.coord(rank()); }
  // This rank's parameters: its stage's blocks, tp-sliced (full model names, local shapes).
  const ParamLayout& local_layout() const;
  const ParamLayout& full_layout() const override;

  // step(): `indices` is this dp replica's slice; its pipeline runs parallel.micro_batches of
  // them.
  // The dp replicas share the samples and each runs them through its pipeline.
  EvalResult evaluate(const Dataset& data, int64_t max_samples) override;
  const PipelineTimes& pipeline_times() const override { return times_; }

  // DDP: broadcasts the optimizer state from dp rank 0 over the dp group; ZeRO: checks each rank's
  // state is attached to its own shard.
  void synchronize_optimizer_state() override;

  // The global indices of this rank's slice (tp_slicing.h) of its stage, cut by the dp strategy.
  CheckpointView checkpoint_view() override;
  std::vector<std::vector<IndexRange>> comm_units() override;

  // The full model's flat parameters, reassembled from every stage and tp slice, on every rank.
  std::vector<float> gather_params() override;
  void load_model(const std::string& path) override;

 private:
  struct Impl;
  HybridShardedOptimizer(Communicator& world, const ShardedOptions& options,
                         std::unique_ptr<Optimizer> wrapped);

  StepOutcome run_step(const Dataset& data, const std::vector<int64_t>& indices, int64_t step,
                       double lr) override;
  // The rank state's own header (hybrid_state.cpp gives the format): topology, coordinate,
  // strategy and local layout, refused on another; the held parameters are the local slice.
  StateFormat state_format() const override;
  void write_state_header(ByteWriter& w) override;
  void check_state_header(ByteReader& r) override;
  std::span<float> held_params() override;

  Topology topo_;
  std::unique_ptr<Impl> impl_;
  PipelineTimes times_;
};

}  // namespace shardlab
