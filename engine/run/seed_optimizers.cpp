#include "engine/run/seed_optimizers.h"

namespace shardlab {

namespace {

ShardedOptions with_strategy(const Communicator& comm, ShardedOptions options,
                             const char* strategy) {
  options.sharding.strategy = strategy;
  return launched_on(comm, std::move(options));
}

ShardedOptions one_tp_group(const Communicator& comm, ShardedOptions options) {
  options.sharding.pp = 1;
  options.sharding.tp = comm.size();
  options.sharding.dp = 1;
  if (options.sharding.strategy == "none") options.sharding.strategy = "ddp";
  return options;
}

}  // namespace

std::unique_ptr<IShardedOptimizer> make_sharded_optimizer(Communicator& comm,
                                                          const ShardedOptions& options,
                                                          std::unique_ptr<Optimizer> wrapped) {
  if (!uses_model_parallelism(options.sharding))
    return ShardedOptimizer::create(comm, options, std::move(wrapped));
  return HybridShardedOptimizer::create(comm, options, std::move(wrapped));
}

StrategyOptimizer::StrategyOptimizer(Communicator& comm, std::unique_ptr<Optimizer> wrapped,
                                     const ShardedOptions& options, const char* strategy)
    : impl_(ShardedOptimizer::create(comm, with_strategy(comm, options, strategy),
                                     std::move(wrapped))) {}

TensorParallelOptimizer::TensorParallelOptimizer(Communicator& comm,
                                                 std::unique_ptr<Optimizer> wrapped,
                                                 const ShardedOptions& options)
    : HybridShardedOptimizer(comm, std::move(wrapped), one_tp_group(comm, options)) {}

}  // namespace shardlab
