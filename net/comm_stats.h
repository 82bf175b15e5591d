// CommStats: the communication side of a run, built from COLLECTIVE, PHASE and STEP events (any
// rank, any order between ranks, in order within a rank): time, bytes and bus bandwidth per
// collective and group, each rank's seconds per step by StepMetric (the app's rank x step heat
// map, where a straggler's peers stand out by waiting), and which group communicated last (the
// sync view). Not thread-safe; owned and fed by a RunModel.
//
// The per-step split follows net/time_accounting.h, so the heat map and the diagnosis agree:
//   comm      every collective's duration
//   wait      of those, the seconds blocked before the last rank arrived (CollectiveEvent::wait,
//             clamped to [0, duration])
//   transfer  duration - wait, of the collectives whose wait is known only
//   compute   PHASE spans (forward, backward, optimizer): end - start
// A collective whose wait is unknown (-1: nccl, send, old recordings) counts in comm but in
// neither wait nor transfer: calling it all transfer would hide a wait we cannot see, calling it
// wait would invent one. So comm - wait - transfer is the unknown part.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/telemetry/events.h"

namespace shardlab::net {

// One (collective, group) pair: "all_reduce" on "dp[1]", "send" on "pp[0]", ...
struct CommKey {
  std::string op;
  std::string group;
  auto operator<=>(const CommKey&) const = default;
};

// What a heat-map cell measures (see the file comment).
enum class StepMetric : uint8_t { comm = 0, wait, transfer, compute };
inline constexpr int kStepMetrics = 4;
const char* to_string(StepMetric metric);

struct CommAggregate {
  int64_t count = 0;   // operations seen (every rank's own record counts once)
  int64_t failed = 0;  // of which ok == false
  int64_t bytes = 0;   // summed payload bytes
  double seconds = 0;  // summed durations
  double max_seconds = 0;
  double busbw_seconds = 0;  // sum of busbw x duration, for the time-weighted mean below
  // Time-weighted mean bus bandwidth in GB/s (0 when no time was spent).
  double mean_busbw() const { return seconds > 0 ? busbw_seconds / seconds : 0.0; }
  double mean_seconds() const { return count > 0 ? seconds / static_cast<double>(count) : 0.0; }
  // Adds `other`'s operations to these (sums; the larger max).
  void merge(const CommAggregate& other);
};

class CommStats {
 public:
  // The heat map keeps the most recent this many steps of every rank.
  static constexpr int64_t kWindowSteps = 512;
  // Events of ranks outside [0, kMaxRanks) are ignored (a corrupt rank must not allocate
  // gigabytes).
  static constexpr int kMaxRanks = 1 << 16;
  // At most this many (op, group) rows; later new ones all count in one ("(other)", "(other)").
  static constexpr size_t kMaxKeys = 4096;

  // Takes COLLECTIVE events (aggregated, and added to the rank's current step: one more than the
  // last STEP the rank reported), PHASE events (compute of the current step) and STEP events
  // (which end the rank's current step); ignores the rest. A negative or non-finite duration, wait
  // or span counts as 0 s (and a non-finite busbw as 0 GB/s).
  void add(const telemetry::Event& event);

  const std::map<CommKey, CommAggregate>& by_key() const { return by_key_; }
  // Totals over every op of groups of one kind: "tp", "pp", "dp", "world" (the part of a group
  // name before '['); the app's per-group summary.
  std::map<std::string, CommAggregate> by_group_kind() const;

  // Seconds of `metric` of `rank` during step `step` (1-based); 0 when it had none or the step is
  // outside the window. The two-argument form is communication seconds (StepMetric::comm).
  double step_seconds(int rank, int64_t step, StepMetric metric) const;
  double step_seconds(int rank, int64_t step) const {
    return step_seconds(rank, step, StepMetric::comm);
  }
  // Whether any collective so far carried a known wait: without one (a backend that cannot
  // measure waits, an old recording) the wait and transfer figures are all 0 and say nothing.
  bool waits_known() const { return waits_known_; }
  // The steps the heat map can show: [first_step(), last_step()], both 0 before any collective or
  // phase. last_step() is the newest step any rank communicated or computed in; first_step() is
  // at most kWindowSteps - 1 before it and never below 1.
  int64_t first_step() const;
  int64_t last_step() const { return last_step_; }
  // One more than the highest rank seen in a COLLECTIVE, PHASE or STEP event (0 before any).
  int ranks() const { return static_cast<int>(per_rank_.size()); }

  // The group of the collective with the latest end (start + duration) seen so far, and that end
  // (epoch seconds); "" and 0 before any collective.
  const std::string& last_group() const { return last_group_; }
  double last_end() const { return last_end_; }

 private:
  struct Slot {
    int64_t step = 0;                           // 0: unused
    std::array<float, kStepMetrics> seconds{};  // by StepMetric
  };
  struct RankRing {
    int64_t current_step = 1;  // last STEP + 1
    // kWindowSteps long once the rank has communicated or computed (empty before: sparse ranks
    // are cheap).
    std::vector<Slot> cells;
  };
  RankRing& ring(int rank);
  // The rank's slot for its current step, reset when it held an older step; nullptr when it
  // holds a newer one (the rank went back to a step that has left the window).
  Slot* current_slot(int rank);

  std::map<CommKey, CommAggregate> by_key_;
  std::vector<RankRing> per_rank_;
  int64_t last_step_ = 0;
  std::string last_group_;
  double last_end_ = 0;
  bool any_collective_ = false;
  bool waits_known_ = false;
};

}  // namespace shardlab::net
