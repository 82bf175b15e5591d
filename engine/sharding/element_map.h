// Element maps: where the elements a rank holds sit in the full model's flat parameters (its
// "global" indices). Checkpoints are written and read in global indices, so any strategy and
// layout can read what any other wrote (resharding): a ZeRO rank's shard is its chunk of every
// bucket, an FSDP rank's its chunk of every block, a tensor-parallel rank's the rows or columns
// of its slice (tp_slicing.h), a pipeline stage's its blocks.
//
// An IndexMap is a list of runs, local [local, local + count) <-> global [global, global +
// count); local elements that map to nothing (padding) are simply not listed.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/param_layout.h"
#include "engine/sharding/shard_layout.h"
#include "engine/tensor_parallel/tp_slicing.h"

namespace shardlab {

struct IndexRun {
  int64_t local = 0;
  int64_t global = 0;
  int64_t count = 0;
  bool operator==(const IndexRun&) const = default;
};
using IndexMap = std::vector<IndexRun>;

// local i <-> global i for i in [0, n).
IndexMap identity_map(int64_t n);

// Rank `rank`'s shard of `layout` (local: offsets in its shard, as the optimizer attached to the
// shard indexes its state) <-> the layout's flat indices; padding is left out.
IndexMap shard_map(const ShardLayout& layout, int rank);

// A tensor-parallel rank's local flat parameters <-> the full model's flat parameters, one run
// per rectangle row (merged where contiguous). With skip_replicated, the parameters every tp rank
// holds whole are left out.
IndexMap tp_map(const std::vector<ParamSlice>& slices, const ParamLayout& local,
                const ParamLayout& global, bool skip_replicated = false);

// x -> z for a: x -> y and b: y -> z (a's global side is b's local side); the x whose y is not
// in b are left out.
IndexMap compose(const IndexMap& a, const IndexMap& b);

// Sorted by global index, with runs that continue each other on both sides merged.
IndexMap sorted_by_global(IndexMap m);

// Calls fn(local, global, n) for every piece of [global, global + count) that `by_global` (sorted
// by global, disjoint) covers; returns how many elements were covered.
template <class Fn>
int64_t for_each_overlap(const IndexMap& by_global, int64_t global, int64_t count, Fn&& fn);

// Sum of the runs' counts.
int64_t mapped_elements(const IndexMap& m);

// --- implementation ---
int64_t first_overlap(const IndexMap& by_global, int64_t global);

template <class Fn>
int64_t for_each_overlap(const IndexMap& by_global, int64_t global, int64_t count, Fn&& fn) {
  int64_t covered = 0;
  const int64_t end = global + count;
  for (size_t i = static_cast<size_t>(first_overlap(by_global, global)); i < by_global.size();
       ++i) {
    const IndexRun& r = by_global[i];
    if (r.global >= end) break;
    const int64_t b = std::max(global, r.global), e = std::min(end, r.global + r.count);
    if (b >= e) continue;
    fn(r.local + (b - r.global), b, e - b);
    covered += e - b;
  }
  return covered;
}

}  // namespace shardlab
