#include "engine/sharding/holdings.h"

#include <algorithm>

namespace shardlab {

std::vector<TensorExtent> tensor_extents(const ParamLayout& full) {
  std::vector<TensorExtent> out;
  out.reserve(full.params().size());
  for (const ParamInfo& p : full.params()) out.push_back({p.name, p.offset, p.numel});
  return out;
}

std::vector<IndexRange> global_ranges(const IndexMap& map) {
  std::vector<IndexRange> out;
  for (const IndexRun& r : sorted_by_global(map)) {
    if (r.count <= 0) continue;
    if (!out.empty() && out.back().end == r.global)
      out.back().end += r.count;
    else
      out.push_back({r.global, r.global + r.count});
  }
  return out;
}

RankHoldings holdings_of(IShardedOptimizer& optimizer) {
  const CheckpointView view = optimizer.checkpoint_maps();
  RankHoldings h;
  h.rank = optimizer.rank();
  h.params = global_ranges(view.held_map);
  h.optimizer_state = global_ranges(view.owned_map);
  const std::string& strategy = optimizer.options().sharding.strategy;
  const bool sharded_grads = strategy == "zero2" || strategy == "fsdp";
  h.grads = sharded_grads ? h.optimizer_state : h.params;
  const int64_t owned = view.optimizer ? view.optimizer->range().size() : 0;
  if (view.optimizer != nullptr) {
    h.state_padding = std::max<int64_t>(0, owned - elements_in(h.optimizer_state));
    h.state_arrays = view.optimizer->state_names();
  }
  // FSDP's parameters are its shard, padded like the state. ZeRO-1/2 keep the whole flat buffer,
  // padded to the shards of the data-parallel group together (dp ranks x the shard); DDP none.
  if (strategy == "fsdp")
    h.params_padding = h.state_padding;
  else if (strategy != "ddp")
    h.params_padding =
        std::max<int64_t>(0, owned * optimizer.topology().dp() - elements_in(h.params));
  h.grads_padding = sharded_grads ? h.state_padding : h.params_padding;
  h.units = optimizer.comm_units();
  return h;
}

int64_t elements_in(const std::vector<IndexRange>& ranges) {
  int64_t n = 0;
  for (const IndexRange& r : ranges) n += r.size();
  return n;
}

}  // namespace shardlab
