// The LAYOUT telemetry event of a rank (engine/telemetry/events.h): who holds what
// (engine/sharding/holdings.h) with the memory planner's bytes beside it, as the teaching views
// draw it. One definition: the wire, recordings, /api/run and the app all carry this event.
#pragma once

#include "engine/plan/memory/planner.h"
#include "engine/sharding/holdings.h"
#include "engine/telemetry/events.h"

namespace shardlab {

// The event for `held` (holdings_of()) in a model of `tensors`, with `plan`'s steady bytes and
// formula (a default MemoryPlan: none known). Lists longer than telemetry::kMaxLayoutRanges are
// cut there and the event says truncated.
telemetry::LayoutEvent layout_event(const RankHoldings& held,
                                    const std::vector<TensorExtent>& tensors,
                                    const std::string& strategy, const MemoryPlan& plan);

}  // namespace shardlab
