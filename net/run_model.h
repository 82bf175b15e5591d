// RunModel: what a collector knows about a run, built from HELLOs and events: the latest state of
// every rank and the series the charts draw. The headless monitor prints it as a table; the app
// (gui/) reads it. Not thread-safe: feed it from one thread (the collector's, or a replay).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "net/comm_stats.h"
#include "net/protocol.h"
#include "net/timeline.h"

namespace shardlab::net {

struct RankState {
  std::optional<Hello> hello;
  int64_t step = 0;
  double loss = 0;
  double step_seconds = 0;
  double throughput = 0;
  bool tokens = false;
  std::array<int64_t, kMemCategories> memory{};  // current bytes by category
  int64_t memory_peak = 0;  // largest current total reported (the events carry per-category
                            // peaks only, whose sum would overstate the peak of the total)
  double comm_seconds = 0;  // summed collective durations
  int64_t collectives = 0;
  double last_seen = 0;       // time of the latest event (epoch seconds)
  double last_heartbeat = 0;  // time of the latest heartbeat (or any event)
  telemetry::JobState state = telemetry::JobState::starting;  // a STEP moves starting to running
  std::string reason;                                         // failure reason
  // Failed because its connection ended before it reported finishing (a JOB_STATE failed with
  // seq kCollectorSeq, see ConnectionLost in collector.h): killed or crashed, or a network failure.
  // Its next HELLO (the publisher reconnecting) puts it back in the state it had, reason cleared.
  bool connection_lost = false;
  std::vector<double> step_times;           // every step's seconds, in order
  std::vector<double> loss_series;          // every step's loss, in order
  std::vector<telemetry::EvalEvent> evals;  // every evaluation, in order
};

class RunModel {
 public:
  // `received`: when the message arrived, epoch seconds by this machine's clock (a live
  // collector); 0 (a replay) judges liveness by the events' own times.
  //
  // A JOB_STATE failed made by the collector (seq kCollectorSeq: the rank's connection was lost)
  // marks the rank failed with its reason and connection_lost, unless the rank has already
  // finished or failed (it keeps that); it does not count as hearing from the rank (last seen,
  // heartbeat, events()). A later HELLO of that rank undoes it. A HELLO from another process
  // (job id, host or pid) for a rank that had finished or failed starts it afresh (starting).
  void add(const Message& message, double received = 0);
  const std::map<int, RankState>& ranks() const { return ranks_; }
  uint64_t events() const { return events_; }
  // Every event also goes to these (see their headers).
  const CommStats& comm() const { return comm_; }
  const Timeline& timeline() const { return timeline_; }

  // A straggler's last step took more than 1.5x the median step time of all ranks' last 20
  // steps and more than 1.5x the median of every rank's last step (needs at least 2 ranks with
  // steps): a step that was slow on every rank makes no rank a straggler. Silent: no heartbeat (or
  // other event) for more than 5 s before `now` while not finished or failed; a rank with no event
  // yet is not silent.
  bool straggler(int rank) const;
  bool silent(int rank, double now) const;
  // True when every rank seen has reached finished or failed, at least one rank was seen, and as
  // many ranks as the HELLOs' world size.
  bool all_done() const;

  // The per-rank table: rank, coordinates, state, step, loss, memory (current total), comm time,
  // last seen (seconds before `now`) and flags (STRAGGLER, SILENT, FAILED: reason). When a rank
  // has reported an evaluation, one line under the rows gives the newest:
  // "eval at step 30: loss 0.4123, accuracy 87.5% (1000 samples)".
  std::string table(double now) const;

 private:
  std::map<int, RankState> ranks_;
  std::map<int, telemetry::JobState> before_lost_;  // a lost rank's state before it was lost
  uint64_t events_ = 0;
  CommStats comm_;
  Timeline timeline_;
};

}  // namespace shardlab::net
