// StepReplay: one recorded step, phase by phase, for the teaching views. Every forward and
// backward (per micro-batch and stage), every collective that moved model state (per group and
// sequence number, with the ranges it moved) and the update, in the order they started, each
// with what it touched on each rank's strips of who holds what (RankState::layout). Built from a
// RunModel's timeline and layouts; the app's scrubber (gui/holdings_view) and the page's
// (resources/web/holdings.js, fed by net/web/step_json.h) draw these same frames.
//
// What a frame touches on a rank, in the full model's flat indices (the rank's LAYOUT: its held
// ranges and its units, the gradient buckets of DDP/ZeRO and the blocks of FSDP):
//   forward          reads the parameters it computes with: all of its units (under FSDP each
//                    block is gathered whole for the time it computes), else its held parameters
//   backward         reads the same parameters and writes their gradients (whole, before any
//                    reduction)
//   reduce-scatter   of the gradients of unit u: sends the unit's partial sums, receives its own
//                    slice of the sum (the unit's part of the rank's optimizer-state ranges)
//   all-reduce       of the gradients of unit u: sends and receives the whole unit
//   all-gather       of the parameters of unit u: sends its own slice, receives the whole unit
//   update           reads the gradients of its own slice and writes its parameters and
//                    optimizer state there (the rank's optimizer-state ranges)
// A collective that moved something else (activations, the loss, a norm: what the strategy did
// not label) or that came from a worker older than protocol version 5 touches nothing. Those of
// tensor parallelism and the pipeline (tp and pp groups, sends and receives) are counted in the
// rank's latest forward or backward before them (`inside`); the others (the loss, norms) are
// frames of their own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/telemetry/events.h"
#include "net/run_model.h"

namespace shardlab::net {

enum class ReplayLane : uint8_t { params, grads, optimizer_state };
enum class ReplayRole : uint8_t { read, write, send, receive };
const char* to_string(ReplayLane lane);
const char* to_string(ReplayRole role);

struct ReplayTouch {
  ReplayLane lane = ReplayLane::params;
  ReplayRole role = ReplayRole::read;
  std::vector<telemetry::LayoutRange> ranges;  // sorted, disjoint, in the full model's indices
};

// One rank's part in a frame.
struct ReplayRank {
  int rank = 0;
  double start = 0, end = 0;  // its span, epoch seconds
  std::vector<ReplayTouch> touches;
};

enum class ReplayKind : uint8_t { forward, backward, collective, update };
const char* to_string(ReplayKind kind);

struct ReplayFrame {
  ReplayKind kind = ReplayKind::forward;
  std::string title;    // "forward, micro-batch 0, stage 0"; "reduce_scatter of grads, bucket 2"
  std::string explain;  // one sentence of what happened to the slices
  double start = 0, end = 0;         // the earliest start and latest end of its ranks' spans
  int stage = -1, micro_batch = -1;  // forward/backward
  std::string op, group;             // collective: "reduce_scatter", "dp[0]"
  telemetry::CollectiveArray array = telemetry::CollectiveArray::unknown;
  int unit = -1;
  int inside = 0;  // forward/backward: tp/pp communication its ranks ran during or after it
  std::vector<ReplayRank> ranks;  // sorted by rank
};

struct StepReplay {
  int64_t step = 0;                 // 0: nothing to replay (see `note`)
  std::vector<int64_t> steps;       // the steps that can be replayed now, ascending
  std::vector<ReplayFrame> frames;  // by start
  std::string note;                 // why there is nothing, or what is missing
  std::string strategy;             // the first LAYOUT's strategy ("" before one)
};

// The replay of `step`: 0 picks the newest step every rank has completed (RunModel::
// newest_replay(), taken when it completed). Another step can be replayed while every rank of the
// world has reported it and the timeline still holds its spans (it keeps the newest
// Timeline::kMaxSpans per rank). Ranks without a LAYOUT show their spans but touch nothing.
StepReplay replay_step(const RunModel& model, int64_t step = 0);
// The same from the timeline alone (what RunModel calls when a step completes); `steps` is filled
// only when the step cannot be replayed (or is 0).
StepReplay replay_from_timeline(const RunModel& model, int64_t step);
// The steps the timeline can replay now, ascending.
std::vector<int64_t> replayable_steps(const RunModel& model);

}  // namespace shardlab::net
