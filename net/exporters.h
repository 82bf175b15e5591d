// Exports of a recording: a Chrome trace (JSON Trace Event Format, opens in Perfetto and
// chrome://tracing: one process per rank, its collectives and pipeline phases as complete "X"
// slices on named threads, steps as instant events) and a CSV of the step series.
#pragma once

#include <ostream>
#include <vector>

#include "net/protocol.h"

namespace shardlab::net {

// Writes the trace of `messages`: process (pid) = rank, named "rank N (pp i, tp j, dp k)" from its
// HELLO ("rank N" without one); threads "steps" (instant "step N", args loss/lr/...),
// "collectives" (X slices named by op, args group/bytes/busbw) and "pipeline" (X slices "F3"/"B3",
// args stage); memory as a counter. Timestamps are microseconds from the earliest time in the
// recording.
void write_chrome_trace(const std::vector<Message>& messages, std::ostream& out);
// "rank,step,loss,lr,grad_norm,throughput,step_seconds,time" and one row per step event.
void write_step_csv(const std::vector<Message>& messages, std::ostream& out);

}  // namespace shardlab::net
