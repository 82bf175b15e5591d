// Who holds what: the slices of the full model that one rank keeps of its parameters, gradients
// and optimizer state, as [begin, end) ranges of the full model's flat indices (the indices of
// full_layout(); padding is left out), with the tensors those indices belong to. The same
// description for every strategy and layout, from the rank's own checkpoint view (element_map.h),
// so what a teaching view draws is what the rank really holds:
//
//   ddp     params, grads and state: everything
//   zero1   params and grads everything, optimizer state the rank's shard of every bucket
//   zero2   params everything, grads and state its shard
//   fsdp    params, grads and state its shard of every block (a block is gathered only while it
//           computes, and let go after)
//   tp, pp  the rank's slice of each tensor (columns or rows) and its stage's blocks; within them
//           the data-parallel strategy's rule above
//
// Gradients are those kept between a step's backward and its update: a ZeRO-2 or FSDP rank
// reduces each bucket or block's gradients into its own shard and keeps that only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/param_layout.h"
#include "engine/sharding/element_map.h"
#include "engine/sharding/sharded_optimizer_interface.h"

namespace shardlab {

// One tensor of the full model: its name and its elements [offset, offset + size).
struct TensorExtent {
  std::string name;
  int64_t offset = 0;
  int64_t size = 0;
  bool operator==(const TensorExtent&) const = default;
};

struct RankHoldings {
  int rank = 0;  // world rank
  // Sorted, disjoint, merged where they touch.
  std::vector<IndexRange> params, grads, optimizer_state;
  // The base optimizer's state arrays (e.g. "exp_avg", "exp_avg_sq" for Adam): each holds
  // optimizer_state.
  std::vector<std::string> state_arrays;
  // Elements the rank's buffers hold beyond the ranges: padding (ZeRO pads the flat buffer to a
  // multiple of the world size, FSDP every block). In each state array for the optimizer state.
  int64_t params_padding = 0, grads_padding = 0, state_padding = 0;
  // The units its data-parallel collectives move (IShardedOptimizer::comm_units()).
  std::vector<std::vector<IndexRange>> units;
};

// The tensors of a model's flat layout, in order.
std::vector<TensorExtent> tensor_extents(const ParamLayout& full);

// The global ranges an element map covers: sorted, merged where they touch.
std::vector<IndexRange> global_ranges(const IndexMap& map);

// This rank's holdings (its checkpoint view and its data-parallel strategy's rule above).
RankHoldings holdings_of(IShardedOptimizer& optimizer);

// Elements in a list of ranges.
int64_t elements_in(const std::vector<IndexRange>& ranges);

}  // namespace shardlab
