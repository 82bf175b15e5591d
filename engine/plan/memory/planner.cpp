#include "engine/plan/memory/planner.h"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/model/model.h"
#include "engine/optim/registry.h"
#include "engine/hybrid/pipeline_stage.h"
#include "engine/sharding/shard_layout.h"
#include "engine/plan/model_states.h"
#include "engine/topology/topology.h"

namespace shardlab {

int optimizer_state_floats(const OptimizerConfig& c) {
  return static_cast<int>(state_floats_per_param(c));
}

MemoryPlan plan_memory(const ParamLayout& layout, const OptimizerConfig& optimizer,
                       const ParallelConfig& parallel, int world) {
  SL_ENFORCE(world >= 1, "planner: world size must be >= 1, got {}", world);
  const std::string& s = parallel.strategy;
  MemoryPlan p;
  p.params = layout.size();
  p.state_floats = optimizer_state_floats(optimizer);
  const int64_t k = 4 * p.state_floats;  // state bytes per parameter
  const int64_t n = world;
  MemoryFigures& st = p.steady;
  using C = MemCategory;
  // The steady figures: ZeRO's formulas (engine/plan/model_states.h) in fp32.
  const auto set_states = [&](int stage) {
    const plan::ModelStateBytes b =
        plan::zero_model_states(stage, p.padded_params, p.shard, {4, 4, k});
    st[C::params] = b.params;
    st[C::grads] = b.grads;
    st[C::optimizer_state] = b.optimizer_state;
  };
  if (s == "none" || s == "ddp") {
    p.padded_params = p.params;
    p.shard = p.params;
    set_states(0);
    p.peak = st;
    p.formula = fmt::format("{}: 4*Psi + 4*Psi + {}*Psi", s, k);
  } else if (s == "zero1" || s == "zero2") {
    p.padded_params = (p.params + n - 1) / n * n;
    p.shard = p.padded_params / n;
    set_states(s == "zero1" ? 1 : 2);
    p.peak = st;
    if (s == "zero2") p.peak[C::grads] += 4 * p.padded_params;  // the full buffer in backward
    p.formula = s == "zero1" ? fmt::format("zero1: 4*Psi' + 4*Psi' + {}*Psi'/N", k)
                             : fmt::format("zero2: 4*Psi' + 4*Psi'/N + {}*Psi'/N", k);
  } else if (s == "fsdp") {
    const ShardLayout sl = ShardLayout::blocks(layout, world);
    p.padded_params = sl.padded_total();
    p.shard = sl.shard_size();
    set_states(3);
    // Live during a step: one gathered block, or two adjacent ones with prefetch (overlap), or
    // every block with fsdp_keep_params; gradients: the block in backward plus the one whose
    // reduce-scatter is in flight (overlap).
    int64_t one = 0, two = 0;
    const auto& u = sl.units();
    for (size_t i = 0; i < u.size(); ++i) {
      one = std::max(one, u[i].padded);
      if (i + 1 < u.size()) two = std::max(two, u[i].padded + u[i + 1].padded);
    }
    two = std::max(two, one);
    p.peak = st;
    p.peak[C::params] +=
        4 * (parallel.fsdp_keep_params ? sl.padded_total() : (parallel.overlap ? two : one));
    p.peak[C::grads] += 4 * (parallel.overlap ? two : one);
    p.formula = fmt::format("fsdp: (4 + 4 + {})*Psi''/N, plus the gathered blocks", k);
  } else {
    SL_THROW(InvalidArgument, "parallel.strategy: unknown strategy '{}'", s);
  }
  return p;
}

MemoryPlan plan_memory_hybrid(const ModelConfig& model, const OptimizerConfig& optimizer,
                              const ParallelConfig& parallel, int world, int rank) {
  const Topology topo = Topology::make({parallel.pp, parallel.tp, parallel.dp}, world);
  const Coord c = topo.coord(rank);
  const std::vector<IndexRange> chunks =
      stage_chunks(model_layout(model), topo.pp(), static_cast<int>(parallel.pp_chunks),
                   parallel.pp_partition, c.pp);
  const ParamLayout local = stage_layout(model.gpt, chunks, TpGroup{nullptr, c.tp, topo.tp()});
  MemoryPlan plan = plan_memory(local, optimizer, parallel, topo.dp());
  plan.formula += fmt::format(" per rank's stage/tp slice, N = dp = {}", topo.dp());
  return plan;
}

JobMemoryPlan plan_job_memory(const ModelConfig& model, const OptimizerConfig& optimizer,
                              const ParallelConfig& p) {
  JobMemoryPlan out;
  const int world = p.strategy == "none" ? 1 : static_cast<int>(p.world_size);
  if (uses_model_parallelism(p)) {
    const Topology topo = Topology::make({p.pp, p.tp, p.dp}, world);
    std::map<std::pair<int, int>, MemoryFigures> by_slice;
    out.steady.reserve(static_cast<size_t>(world));
    for (int rank = 0; rank < world; ++rank) {
      const Coord c = topo.coord(rank);
      auto it = by_slice.find({c.pp, c.tp});
      if (it == by_slice.end()) {
        const MemoryPlan plan = plan_memory_hybrid(model, optimizer, p, world, rank);
        if (rank == 0) out.formula = plan.formula;
        it = by_slice.emplace(std::pair{c.pp, c.tp}, plan.steady).first;
      }
      out.steady.push_back(it->second);
    }
  } else {
    const MemoryPlan plan = plan_memory(model_layout(model), optimizer, p, world);
    out.formula = plan.formula;
    out.steady.assign(static_cast<size_t>(world), plan.steady);
  }
  return out;
}

}  // namespace shardlab
