// The four strategies behind ShardedOptimizer::create (internal to engine/parallel).
#pragma once

#include <memory>

#include "engine/parallel/sharded_optimizer.h"

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

// Bucket size in elements from parallel.bucket_mb.
int64_t bucket_elements(const ParallelConfig& config);

}  // namespace shardlab::parallel_detail
