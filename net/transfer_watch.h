// TransferWatch: tells a slow link from a slow rank, from the COLLECTIVE events of a run. For each
// kind of group (tp, pp, dp, world) it measures the bus bandwidth of the transfers alone: a
// collective's bus bandwidth scaled to the part of its duration that was not waiting for the last
// rank (busbw x duration / (duration - wait)), so a rank that computes slowly (its peers wait
// longer) leaves it unchanged, while a slow or lossy link lowers it for every rank of the group.
//
// The baseline is the first kBaselineSeconds of a kind's collectives (by the events' own times,
// so a replay judges as the live monitor did); the recent figure the last kRecentSeconds. A kind
// whose recent figure falls below 1/kSlowFactor of its baseline is said in words:
//   "world transfers at 0.01 GB/s against 1.2 GB/s in the first 10 s — a link is slow; run
//    shardlab doctor --hosts to find it"
// Collectives with an unknown wait (-1: nccl, send) or no bytes are not counted.
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <string>

#include "engine/telemetry/events.h"

namespace shardlab::net {

struct SlowTransfers {
  std::string kind;  // "dp", "world", ...
  double recent_gb_per_s = 0;
  double baseline_gb_per_s = 0;
  std::string text;  // the line above
};

class TransferWatch {
 public:
  // The first this many seconds of a kind's collectives are its baseline.
  static constexpr double kBaselineSeconds = 10;
  // The recent figure: the last this many seconds (judged once they hold this much time).
  static constexpr double kRecentSeconds = 5;
  // A link's bandwidth varies with the machine's load by well under 2x (measured on the test
  // cluster: 2.7-4.1 GB/s pair to pair); a link limited or losing packets costs 10x and more
  // (100 Mbit/s against GB/s). 4x tells the two apart.
  static constexpr double kSlowFactor = 4;

  // The latest figure: the last this many seconds, as long as a straggler verdict looks back
  // (net/time_accounting.h: kWindowSlots x kSlotSeconds).
  static constexpr double kLatelySeconds = 1;

  // Takes COLLECTIVE events; ignores the rest.
  void add(const telemetry::Event& event);
  // The kind slowest against its baseline, when below 1/kSlowFactor of it; else nothing.
  std::optional<SlowTransfers> slow() const;
  // Whether some kind's transfers of the last kLatelySeconds (at least 3 collectives) are below
  // 1/kSlowFactor of its baseline. Not said in words (one second is too short to be sure of a
  // link): it keeps a straggler from being named in the seconds a link has just become slow,
  // before slow() has the recent window it needs, when the ranks behind the link arrive last.
  bool slow_lately() const;
  // The transfer bus bandwidth of `kind` over its baseline and recent windows (0: none yet).
  double baseline(const std::string& kind) const;
  double recent(const std::string& kind) const;

 private:
  struct Sample {
    double end = 0;        // event time
    double bus_bytes = 0;  // busbw x duration (GB)
    double transfer = 0;   // duration - wait (s)
  };
  struct Kind {
    double first = -1;  // time of its first collective
    double base_bus = 0, base_transfer = 0;
    std::deque<Sample> recent;  // within kRecentSeconds of the newest
    double recent_bus = 0, recent_transfer = 0;
  };
  std::map<std::string, Kind> kinds_;
};

}  // namespace shardlab::net
