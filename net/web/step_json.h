// The dashboard's "step" section (and /api/run's): one recorded step phase by phase
// (net/step_replay.h), the newest step every rank has completed, for the page's scrubber over the
// strips of who holds what, and for scripts.
//
//   {"step": 12,                        0 when there is nothing to replay ("note" says why)
//    "first": 3, "last": 12,            the steps the timeline can still replay
//    "strategy": "zero2", "note": "",
//    "frames": [{"kind": "forward" | "backward" | "collective" | "update",
//                "title", "explain",
//                "start", "end",         seconds from the step's first frame
//                "stage", "micro_batch", forward/backward (else -1)
//                "op", "group", "array", "unit",   collective ("array": params, grads, unknown)
//                "inside",               unlabelled communication counted in a forward/backward
//                "ranks": [{"rank", "start", "end",
//                           "touches": [{"lane": "params" | "grads" | "optimizer_state",
//                                        "role": "read" | "write" | "send" | "receive",
//                                        "ranges": [[begin, end], ...]}]}]}],
//    "truncated": false}                 frames past kMaxStepFrames were left out
//
// Ranges are [begin, end) in the full model's flat indices, as in the "layout" section.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "net/run_model.h"

namespace shardlab::net {

inline constexpr size_t kMaxStepFrames = 512;

std::string step_section(const RunModel& model, int64_t step = 0);

}  // namespace shardlab::net
