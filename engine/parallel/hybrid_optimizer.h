// HybridShardedOptimizer: the seed's HybridShardedOptimizer, 3D parallelism for the GPT model.
//
//   tensor   inside each tp group: Megatron-style layers (engine/parallel/tensor/) and the
//            TensorParallelOptimizer's all-reduce of replicated parameters' gradients
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
#include "engine/parallel/sharded_optimizer.h"
#include "engine/parallel/topology.h"
#include "engine/train/trainer.h"
#include "engine/train/training_loop.h"

namespace shardlab {

// Seconds a stage spent in the pipeline part of its steps.
struct PipelineTimes {
  double busy = 0;  // running forward and backward ops (tensor-parallel all-reduces included)
  double idle = 0;  // waiting to receive from a neighbouring stage
  int64_t steps = 0;
  // idle / (busy + idle): this stage's bubble fraction.
  double bubble() const { return busy + idle > 0 ? idle / (busy + idle) : 0.0; }
};

class HybridShardedOptimizer {
 public:
  // Builds the topology and its groups from `world` (options.sharding's pp, tp, dp), this rank's
  // stage and slice of the GPT model (initialised as one process would), the base optimizer and
  // the data-parallel strategy options.sharding.strategy (ddp, zero1 or zero2). Collective.
  // Throws InvalidArgument naming the field for a configuration it cannot run.
  static std::unique_ptr<HybridShardedOptimizer> create(Communicator& world,
                                                        const ShardedOptions& options);
  ~HybridShardedOptimizer();

  int rank() const { return world_.rank(); }
  int world_size() const { return world_.size(); }
  const Topology& topology() const { return topo_; }
  Coord coord() const { return topo_.coord(rank()); }
  const ParallelConfig& sharding_configuration() const { return options_.sharding; }
  const ShardedOptions& options() const { return options_; }
  Optimizer& wrapped_optimizer() { return *optimizer_; }
  // This rank's parameters: its stage's blocks, tp-sliced (full model names, local shapes).
  const ParamLayout& local_layout() const;
  const ParamLayout& full_layout() const;

  // As ShardedOptimizer::optimize; the result's params are the full model's parameters,
  // reassembled on every rank.
  TrainResult optimize(const OptimizeInput& input);
  // One optimizer step on this replica's slice `indices` of a global batch; returns the global
  // mean loss.
  double step(const Dataset& data, const std::vector<int64_t>& indices, double lr);
  // Mean loss and accuracy over max_samples evenly spaced samples (0: all); the dp replicas share
  // the samples and each runs them through its pipeline. The same figures on every rank.
  EvalResult evaluate(const Dataset& data, int64_t max_samples);
  bool should_early_stop() const;
  int64_t steps_done() const { return steps_done_; }
  double last_grad_norm() const { return last_grad_norm_; }
  const MemorySnapshot& memory_after_last_step() const { return steady_memory_; }
  const PipelineTimes& pipeline_times() const { return times_; }

  // DDP: broadcasts the optimizer state from dp rank 0 over the dp group; ZeRO: checks each rank's
  // state is attached to its own shard.
  void synchronize_optimizer_state();

  // This rank's state: topology, coordinate, strategy and local layout (checked on load), step,
  // data position, early stopping, its parameters and its optimizer state. deserialize() refuses
  // bytes from another layout, rank or strategy with InvalidArgument naming what differs.
  std::vector<uint8_t> serialize();
  void deserialize(std::span<const uint8_t> bytes);

  // As ShardedOptimizer's: the global indices of this rank's slice (tp_slicing.h) of its stage,
  // cut by the dp strategy, for checkpoints that load into any layout.
  CheckpointView checkpoint_view();
  TrainingProgress progress() const;
  void restore_progress(const TrainingProgress& p);

  // The full model's flat parameters, reassembled from every stage and tp slice, on every rank.
  std::vector<float> gather_params();
  // Writes them as a model file (rank 0 writes); load_model reads one and keeps this rank's slice.
  void save_model(const std::string& path);
  void load_model(const std::string& path);

 private:
  struct Impl;
  HybridShardedOptimizer(Communicator& world, const ShardedOptions& options, Topology topo);

  StepOutcome run_step(const Dataset& data, const std::vector<int64_t>& indices, int64_t step,
                       double lr);

  Communicator& world_;
  ShardedOptions options_;
  Topology topo_;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<Optimizer> optimizer_;
  int64_t steps_done_ = 0;
  double last_grad_norm_ = 0;
  MemorySnapshot steady_memory_;
  PipelineTimes times_;
};

}  // namespace shardlab
