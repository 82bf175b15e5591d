// The seed's named sharded optimizers (AiDotNet.DistributedTraining: FSDPOptimizer,
// ZeRO2Optimizer, TensorParallelOptimizer, HybridShardedOptimizer), each built as the seed builds
// it: from a base optimizer INSTANCE (the wrapped optimizer: any engine::Optimizer:
// make_optimizer() for the registry's SGD/Adam/... or the caller's own subclass) plus a sharding
// configuration (ShardedOptions: the strategy settings, the model, the training settings). All are
// IShardedOptimizer (sharded_optimizer_interface.h), so code written against the interface runs any
// of them.
//
//   Communicator& comm = ...;  // e.g. a rank of run_threads (engine/comm/threads/world.h)
//   ShardedOptions config;
//   config.blocks = [] { ...return my blocks... };  // or config.model.kind = "mlp" / "gpt"
//   config.train.batch_size = 64; config.train.steps = 100;
//   FSDPOptimizer fsdp(comm, make_optimizer(adam_config), config);  // or the caller's own subclass
//   TrainResult r = fsdp.optimize({.train = &train, .eval = &eval});
//
// The model: a rank needs its own model, stored as its strategy needs (ZeRO pads the flat buffers
// to a multiple of the world size, FSDP keeps only its shard and materialises one block at a
// time), so the configuration carries a recipe, not an instance: ShardedOptions::blocks (the
// caller's own blocks, built from the engine's layers) or ShardedOptions::model (the engine's MLP
// or GPT). Every rank initialises it from model.seed exactly as one process would, so the run
// equals the single-process Trainer on the same blocks. To start from trained weights, call
// load_model() with a model file (engine/model/model_file.h) before optimize().
//
// The launch fields of the configuration (parallel.world_size, backend, timeout_s) are taken from
// the communicator; the strategy from the type. Throws InvalidArgument naming the field for a
// configuration the strategy cannot run. Construction is collective.
#pragma once

#include <memory>

#include "engine/comm/communicator.h"
#include "engine/hybrid/hybrid_optimizer.h"
#include "engine/optim/optimizer.h"
#include "engine/sharding/sharded_optimizer_interface.h"
#include "engine/strategies/sharded_optimizer.h"

namespace shardlab {

// The optimizer a job's options ask for: HybridShardedOptimizer when they use pp or tp
// (uses_model_parallelism), else ShardedOptimizer::create's strategy. `wrapped` as in
// ShardedOptimizer::create (null: made from options.optimizer). Collective.
std::unique_ptr<IShardedOptimizer> make_sharded_optimizer(
    Communicator& comm, const ShardedOptions& options,
    std::unique_ptr<Optimizer> wrapped = nullptr);

// A 1-D strategy under its own name: an IShardedOptimizer that owns the ShardedOptimizer
// ShardedOptimizer::create builds for `strategy` and passes every call to it.
class StrategyOptimizer : public IShardedOptimizer {
 public:
  int rank() const override { return impl_->rank(); }
  int world_size() const override { return impl_->world_size(); }
  const ShardedOptions& options() const override { return impl_->options(); }
  Optimizer& wrapped_optimizer() override { return impl_->wrapped_optimizer(); }
  void synchronize_optimizer_state() override { impl_->synchronize_optimizer_state(); }
  TrainResult optimize(const OptimizeInput& input) override { return impl_->optimize(input); }
  std::vector<uint8_t> serialize() override { return impl_->serialize(); }
  void deserialize(std::span<const uint8_t> bytes) override { impl_->deserialize(bytes); }
  void save_model(const std::string& path) override { impl_->save_model(path); }
  void load_model(const std::string& path) override { impl_->load_model(path); }
  bool should_early_stop() const override { return impl_->should_early_stop(); }
  double step(const Dataset& data, const std::vector<int64_t>& indices, double lr) override {
    return impl_->step(data, indices, lr);
  }
  EvalResult evaluate(const Dataset& data, int64_t max_samples) override {
    return impl_->evaluate(data, max_samples);
  }
  int64_t steps_done() const override { return impl_->steps_done(); }
  double last_grad_norm() const override { return impl_->last_grad_norm(); }
  const MemorySnapshot& memory_after_last_step() const override {
    return impl_->memory_after_last_step();
  }
  const Topology& topology() const override { return impl_->topology(); }
  const ParamLayout& full_layout() const override { return impl_->full_layout(); }
  const PipelineTimes& pipeline_times() const override { return impl_->pipeline_times(); }
  CheckpointView checkpoint_view() override { return impl_->checkpoint_view(); }
  std::vector<std::vector<IndexRange>> comm_units() override { return impl_->comm_units(); }
  TrainingProgress progress() const override { return impl_->progress(); }
  void restore_progress(const TrainingProgress& p) override { impl_->restore_progress(p); }
  std::vector<float> gather_params() override { return impl_->gather_params(); }

  // This rank's model (its storage as the strategy keeps it) and the strategy itself.
  Model& model() { return impl_->model(); }
  ShardedOptimizer& strategy() { return *impl_; }

 protected:
  StrategyOptimizer(Communicator& comm, std::unique_ptr<Optimizer> wrapped,
                    const ShardedOptions& options, const char* strategy);

 private:
  std::unique_ptr<ShardedOptimizer> impl_;
};

// The 1-D strategies by name (ShardedOptimizer::create's parallel.strategy).
enum class Strategy1D { ddp, zero1, zero2, fsdp };
constexpr const char* strategy_name(Strategy1D s) {
  constexpr const char* names[] = {"ddp", "zero1", "zero2", "fsdp"};
  return names[static_cast<int>(s)];
}

// One named type per 1-D strategy: the configuration's parallel.strategy is the type's.
template <Strategy1D S>
class Named1DOptimizer final : public StrategyOptimizer {
 public:
  Named1DOptimizer(Communicator& comm, std::unique_ptr<Optimizer> wrapped,
                   const ShardedOptions& options)
      : StrategyOptimizer(comm, std::move(wrapped), options, strategy_name(S)) {}
};

// The seed's ZeRO2Optimizer: optimizer state and gradients sharded across ranks. (DDP and ZeRO-1
// have no seed name: make_sharded_optimizer or ShardedOptimizer::create build them by strategy.)
using ZeRO2Optimizer = Named1DOptimizer<Strategy1D::zero2>;
// The seed's FSDPOptimizer: parameters, gradients and optimizer state sharded (ZeRO-3).
using FSDPOptimizer = Named1DOptimizer<Strategy1D::fsdp>;

// The seed's TensorParallelOptimizer: every rank of `comm` in one tensor-parallel group
// (pp 1 x tp world x dp 1) of the GPT model (options.model.kind "gpt"; Megatron-style layers,
// replicated parameters' gradients averaged within the group). options.sharding's pp, tp and dp
// are set by the type.
class TensorParallelOptimizer final : public HybridShardedOptimizer {
 public:
  TensorParallelOptimizer(Communicator& comm, std::unique_ptr<Optimizer> wrapped,
                          const ShardedOptions& options);
};

}  // namespace shardlab
