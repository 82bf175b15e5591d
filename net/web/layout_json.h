// The dashboard's "layout" section (and /api/run's): who holds what on every rank that sent its
// LAYOUT event (engine/telemetry/events.h), for the page's strips and for scripts.
//
//   {"tensors": [{"name", "offset", "size"}],   the full model's flat layout
//    "bytes_per_element": 4,
//    "ranks": [{"rank", "strategy",
//               "held": {"params": [[begin, end], ...], "grads": [...], "optimizer_state": [...]},
//               "state_arrays": ["exp_avg", ...],
//               "padding": {"params", "grads", "optimizer_state"},   elements beyond the ranges
//               "planned": {"params", "grads", "optimizer_state"},   the planner's bytes
//               "formula",
//               "units": [[[begin, end], ...], ...],   the buckets (blocks under FSDP) its
//                                                      collectives move (protocol version 5)
//               "truncated"}]}
//
// Ranges are [begin, end) in the full model's flat indices, padding left out. A rank with no
// LAYOUT (an older worker, a recording from before protocol version 4) is not in "ranks"; null
// when no rank has one.
#pragma once

#include <string>

#include "net/run_model.h"

namespace shardlab::net {

std::string layout_section(const RunModel& model);

}  // namespace shardlab::net
