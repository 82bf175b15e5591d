// CommStats: the communication side of a run, built from COLLECTIVE and STEP events (any rank, any
// order between ranks, in order within a rank): time, bytes and bus bandwidth per collective and
// group, each rank's communication seconds per step (the app's rank x step heat map, where a
// straggler's peers stand out by waiting), and which group communicated last (the sync view).
// Not thread-safe; owned and fed by a RunModel.
#pragma once

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

  // Takes COLLECTIVE events (aggregated, and added to the rank's current step: one more than the
  // last STEP the rank reported) and STEP events (which end the rank's current step); ignores the
  // rest. A negative or non-finite duration counts as 0 s (and a non-finite busbw as 0 GB/s).
  void add(const telemetry::Event& event);

  const std::map<CommKey, CommAggregate>& by_key() const { return by_key_; }
  // Totals over every op of groups of one kind: "tp", "pp", "dp", "world" (the part of a group
  // name before '['); the app's per-group summary.
  std::map<std::string, CommAggregate> by_group_kind() const;

  // Communication seconds of `rank` during step `step` (1-based); 0 when it had none or the step
  // is outside the window.
  double step_seconds(int rank, int64_t step) const;
  // The steps the heat map can show: [first_step(), last_step()], both 0 before any collective.
  // last_step() is the newest step any rank communicated in; first_step() is at most
  // kWindowSteps - 1 before it and never below 1.
  int64_t first_step() const;
  int64_t last_step() const { return last_step_; }
  // One more than the highest rank seen in a COLLECTIVE or STEP event (0 before any).
  int ranks() const { return static_cast<int>(per_rank_.size()); }

  // The group of the collective with the latest end (start + duration) seen so far, and that end
  // (epoch seconds); "" and 0 before any collective.
  const std::string& last_group() const { return last_group_; }
  double last_end() const { return last_end_; }

 private:
  struct RankRing {
    int64_t current_step = 1;  // last STEP + 1
    // Both kWindowSteps long once the rank has communicated (empty before: sparse ranks are cheap).
    std::vector<float> seconds;
    std::vector<int64_t> step_of;  // 0: slot unused
  };
  RankRing& ring(int rank);

  std::map<CommKey, CommAggregate> by_key_;
  std::vector<RankRing> per_rank_;
  int64_t last_step_ = 0;
  std::string last_group_;
  double last_end_ = 0;
  bool any_collective_ = false;
};

}  // namespace shardlab::net
