// Exports of a recording: a Chrome trace (JSON Trace Event Format, opens in Perfetto and
// chrome://tracing: one process per rank, its collectives and pipeline phases as complete "X"
// slices on named threads, waits apart from transfers, steps as instant events) and a CSV of the
// step series with each step's compute, wait and transfer seconds.
#pragma once

#include <ostream>
#include <vector>

#include "net/protocol.h"

namespace shardlab::net {

// Writes the trace of `messages`: process (pid) = rank, named "rank N (pp i, tp j, dp k)" from its
// HELLO ("rank N" without one); threads "steps" (instant "step N", args loss/lr/...),
// "collectives" (X slices named by op, category "collective", args group/bytes/busbw, and
// wait_s/last_rank when known) and "pipeline" (X slices "F3"/"B3", args stage); memory as a
// counter. A collective whose wait is known and above 0 is two slices side by side: "wait (op
// group)", category "wait", from its start for the wait, then the op's slice for the rest (the
// transfer), so the time lost to a late rank stands apart; with an unknown wait (-1) the op is
// one slice as before. Timestamps are microseconds from the earliest time in the recording.
void write_chrome_trace(const std::vector<Message>& messages, std::ostream& out);
// "rank,step,loss,lr,grad_norm,throughput,step_seconds,time,compute_s,wait_s,transfer_s,host" and
// one row per step event. compute_s, wait_s and transfer_s are the rank's seconds in that step
// (its events since its previous STEP), split as net/time_accounting.h does: compute = PHASE
// spans, wait = the blocked part of collectives, transfer = the rest of those whose wait is known
// (collectives with an unknown wait are in neither). host: the rank's HELLO's ("" without one).
void write_step_csv(const std::vector<Message>& messages, std::ostream& out);

}  // namespace shardlab::net
