#include "engine/run/layout_telemetry.h"

namespace shardlab {

namespace {

std::vector<telemetry::LayoutRange> ranges_of(const std::vector<IndexRange>& ranges,
                                              bool& truncated) {
  std::vector<telemetry::LayoutRange> out;
  const size_t n = std::min(ranges.size(), telemetry::kMaxLayoutRanges);
  truncated |= n < ranges.size();
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back({ranges[i].begin, ranges[i].end});
  return out;
}

}  // namespace

telemetry::LayoutEvent layout_event(const RankHoldings& held,
                                    const std::vector<TensorExtent>& tensors,
                                    const std::string& strategy, const MemoryPlan& plan) {
  telemetry::LayoutEvent e;
  e.strategy = strategy;
  e.tensors.reserve(tensors.size());
  for (const TensorExtent& t : tensors) e.tensors.push_back({t.name, t.offset, t.size});
  e.params = ranges_of(held.params, e.truncated);
  e.grads = ranges_of(held.grads, e.truncated);
  e.optimizer_state = ranges_of(held.optimizer_state, e.truncated);
  e.state_arrays = held.state_arrays;
  e.bytes_per_element = static_cast<int64_t>(sizeof(float));
  e.params_padding = held.params_padding;
  e.grads_padding = held.grads_padding;
  e.state_padding = held.state_padding;
  e.planned = {plan.steady[MemCategory::params], plan.steady[MemCategory::grads],
               plan.steady[MemCategory::optimizer_state]};
  e.formula = plan.formula;
  size_t room = telemetry::kMaxLayoutRanges;
  for (const std::vector<IndexRange>& unit : held.units) {
    if (unit.size() > room) {
      e.truncated = true;
      break;
    }
    room -= unit.size();
    e.units.push_back(ranges_of(unit, e.truncated));
  }
  return e;
}

}  // namespace shardlab
