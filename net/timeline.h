// Timeline: the recent spans of every rank's time — forward, backward and optimizer phases
// (PHASE events), collectives and sends (COLLECTIVE events) — and where each step ended (STEP
// events), so the app can draw a lane per rank in which pipeline bubbles and waiting ranks show
// as idle gaps. Built from events in any order between ranks (and, since an event is published
// when its span ends, spans arrive roughly but not strictly in start order). Bounded: each rank
// keeps its newest kMaxSpans spans and kMaxSteps step marks. Not thread-safe; owned and fed by a
// RunModel.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/telemetry/events.h"

namespace shardlab::net {

enum class SpanKind : uint8_t { forward, backward, optimizer, collective };
const char* to_string(SpanKind kind);

struct Span {
  SpanKind kind = SpanKind::forward;
  double start = 0, end = 0;  // epoch seconds, end >= start
  int32_t micro_batch = -1;   // forward/backward: the micro-batch; -1 otherwise
  // forward/backward: the PHASE event's stage, the virtual stage the op ran (chunk * pp + stage
  // with interleaved 1F1B, the pipeline stage otherwise); -1 otherwise.
  int32_t virtual_stage = -1;
  uint32_t label = 0;  // collective: index into Timeline::labels() ("all_reduce dp[1]")
  bool ok = true;      // collective: false when it failed
  // collective: its communicator's sequence number (the same on every rank of the group), and
  // what it moved (CollectiveEvent::array, unit).
  uint64_t seq = 0;
  telemetry::CollectiveArray array = telemetry::CollectiveArray::unknown;
  int32_t unit = -1;
};

struct StepMark {
  int64_t step = 0;           // 1-based
  double start = 0, end = 0;  // end = the STEP event's time, start = end - step seconds
};

class Timeline {
 public:
  static constexpr size_t kMaxSpans = 2048;  // per rank
  static constexpr size_t kMaxSteps = 256;   // per rank
  // Events of ranks outside [0, kMaxRanks) are ignored.
  static constexpr int kMaxRanks = 1 << 16;
  // At most this many distinct collective labels ("all_reduce dp[1]"); later new ones "(other)".
  static constexpr size_t kMaxLabels = 4096;

  // Takes PHASE, COLLECTIVE and STEP events; ignores the rest. A span whose end is before its
  // start (clock trouble) is kept with zero length; one with a non-finite time is dropped. Step
  // marks are kept sorted by step (a repeated step replaces the earlier mark).
  void add(const telemetry::Event& event);

  // One more than the highest rank seen in a PHASE, COLLECTIVE or STEP event (0 before any).
  int ranks() const { return static_cast<int>(lanes_.size()); }
  // The rank's spans, sorted by start (ties by end); empty for an unknown rank.
  const std::deque<Span>& spans(int rank) const;
  // The rank's step marks, sorted by step; empty for an unknown rank.
  const std::deque<StepMark>& steps(int rank) const;
  // The labels collective spans refer to ("all_reduce dp[1]").
  const std::vector<std::string>& labels() const { return labels_; }

  // The time window of the last `steps` completed steps: from the earliest start among all
  // ranks' marks of steps (newest - steps + 1 .. newest) to the latest end of any step mark (so
  // work after the newest step, e.g. an evaluation, stays out until a step ends after it). {0, 0}
  // before any step mark. `steps` below 1 counts as 1.
  std::pair<double, double> recent_window(int steps) const;
  // Seconds of [t0, t1] covered by at least one of the rank's spans (overlaps counted once); the
  // rest of the window is the rank's idle time. 0 for an unknown rank or when t1 <= t0.
  double busy_seconds(int rank, double t0, double t1) const;

 private:
  struct Lane {
    std::deque<Span> spans;
    std::deque<StepMark> steps;
  };
  Lane& lane(int rank);
  uint32_t label_of(const std::string& text);

  std::vector<Lane> lanes_;
  std::vector<std::string> labels_;
  std::unordered_map<std::string, uint32_t> label_index_;
  std::string label_scratch_;  // "op group" built here, so a known label costs no allocation
  double latest_step_end_ = 0;
  int64_t newest_step_ = 0;
  bool any_step_ = false;
};

}  // namespace shardlab::net
