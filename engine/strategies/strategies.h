// The four strategies behind ShardedOptimizer::create (internal to engine/strategies and engine/hybrid).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "engine/strategies/sharded_optimizer.h"

namespace shardlab::parallel_detail {

std::unique_ptr<ShardedOptimizer> make_ddp(Communicator& comm, const ShardedOptions& options);
// stage 1: ZeRO-1 (optimizer state sharded); stage 2: ZeRO-2 (and gradients).
std::unique_ptr<ShardedOptimizer> make_zero(Communicator& comm, const ShardedOptions& options,
                                            int stage);
std::unique_ptr<ShardedOptimizer> make_fsdp(Communicator& comm, const ShardedOptions& options);

// Sums each value over the ranks of `comm`, in rank order, in double: the same bits on every
// rank (the values travel as float pairs through all_gather, exact to ~48 bits). Collective.
std::vector<double> sum_over_ranks(Communicator& comm, std::span<const double> values);
// Every rank's `values` (the same count on each), rank after rank. Collective.
std::vector<double> gather_over_ranks(Communicator& comm, std::span<const double> values);

// Rank 0 writes `full` as a model file for `layout` (read_model_file reads it back); every rank
// throws IoError when it could not. Collective.
void write_model_file_collective(Communicator& comm, const std::string& path,
                                 const ParamLayout& layout, std::span<const float> full);
// Rank 0's optimizer state replaces every other rank's (replicated state). Collective.
void broadcast_optimizer_state(Communicator& comm, Optimizer& optimizer);
// Throws InvalidArgument unless every rank's optimizer has taken the same number of steps.
// Collective.
void check_optimizer_steps_agree(Communicator& comm, const Optimizer& optimizer);

// Bucket size in elements from parallel.bucket_mb.
int64_t bucket_elements(const ParallelConfig& config);

}  // namespace shardlab::parallel_detail
