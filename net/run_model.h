// RunModel: what a collector knows about a run, built from HELLOs and events: the latest state of
// every rank and the series the charts draw. The headless monitor prints it as a table; the app
// (gui/) reads it. Not thread-safe: feed it from one thread (the collector's, or a replay).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "net/comm_stats.h"
#include "net/protocol.h"
#include "net/time_accounting.h"
#include "net/timeline.h"
#include "net/transfer_watch.h"

namespace shardlab::net {

struct StepReplay;  // net/step_replay.h

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
  // The same by the kind of group (comm_kind()): tp, pp, dp, world; other groups count in none.
  std::array<double, 4> comm_seconds_by_kind{};
  int64_t collectives = 0;
  double last_seen = 0;       // time of the latest event (epoch seconds)
  double last_heartbeat = 0;  // time of the latest heartbeat (or any event)
  telemetry::JobState state = telemetry::JobState::starting;  // a STEP moves starting to running
  std::string reason;                                         // failure reason
  // Failed because its connection ended before it reported finishing (a JOB_STATE failed with
  // seq kCollectorSeq, see ConnectionLost in collector.h): killed or crashed, or a network failure.
  // Its next HELLO (the publisher reconnecting) puts it back in the state it had, reason cleared.
  bool connection_lost = false;
  // The step seconds and loss of the rank's STEP events, in order: every series_stride-th one
  // (point i is the (i * series_stride + 1)-th STEP). Bounded: when they reach kMaxSeriesPoints
  // every other point goes and the stride doubles, so a long run (or a peer sending millions of
  // steps) keeps at most that many per rank, evenly spread over the whole run.
  std::vector<double> step_times;
  std::vector<double> loss_series;
  int64_t series_stride = 1;
  int64_t series_steps = 0;  // STEP events seen
  // The rank's EVAL events, in order, bounded the same way: every eval_stride-th one (evals[i] is
  // the (i * eval_stride + 1)-th EVAL received); at kMaxSeriesPoints every other one goes and the
  // stride doubles. Each keeps its own step (EvalEvent::step): draw them by that, not by index.
  // The newest is last_eval, which the thinned list need not hold.
  std::vector<telemetry::EvalEvent> evals;
  int64_t eval_stride = 1;
  int64_t evals_seen = 0;  // EVAL events seen
  std::optional<telemetry::EvalEvent> last_eval;
  // Who holds what (its LAYOUT event, the newest): none from a worker of protocol version 3, or a
  // recording made before version 4 (the views then say the layout is unknown).
  std::optional<telemetry::LayoutEvent> layout;
};

// The kinds of communicator group a collective runs on, the part of its group name before '['
// ("tp[1]" -> tp): index into RankState::comm_seconds_by_kind.
inline constexpr std::array<const char*, 4> kCommKinds{"tp", "pp", "dp", "world"};
// kCommKinds' index of `group`'s kind; -1 for another name.
int comm_kind(const std::string& group);

// The most points RankState keeps per series (see step_times) and evaluations (see evals).
inline constexpr size_t kMaxSeriesPoints = size_t{1} << 16;

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
  // The world size: the largest a HELLO gave, or the highest rank seen + 1 (0 before any rank).
  int world() const;
  uint64_t events() const { return events_; }
  // LAYOUT events taken so far: a view caches what it built from the layouts until this changes.
  uint64_t layouts() const { return layouts_; }
  // Every event also goes to these (see their headers).
  const CommStats& comm() const { return comm_; }
  const Timeline& timeline() const { return timeline_; }
  // Transfer bandwidth per kind of group against its start: a slow link (net/transfer_watch.h).
  const TransferWatch& transfers() const { return transfers_; }

  // Where each rank's time goes (compute, wait, transfer per step) and the diagnosis over the
  // last steps (net/time_accounting.h): the straggler is the rank its peers wait for, the
  // bottleneck the pipeline stage busiest by far that has become so since the layout baseline,
  // uneven a layout whose stages were that uneven from the start. Computed once per change. No
  // straggler is named while transfers() says a group's transfers are slow (a link, not a rank).
  const TimeAccounting& time() const { return time_; }
  const Diagnosis& diagnosis() const;
  // The newest step any rank has reported.
  int64_t newest_step() const { return newest_step_; }
  // The newest step every rank has reported, phase by phase (net/step_replay.h), taken when its
  // last rank reported it, while the timeline still held all of its spans; null before one.
  const StepReplay* newest_replay() const { return newest_replay_.get(); }
  // Each rank's place for the diagnosis: its stage, the pipeline depth and "pp0 tp1 dp2".
  std::map<int, RankPlace> places() const;
  // The rank the diagnosis names slow. Silent: no heartbeat (or other event) for more than 5 s
  // before `now` while not finished or failed; a rank with no event yet is not silent.
  bool straggler(int rank) const;
  bool silent(int rank, double now) const;
  // True when every rank seen has reached finished or failed, at least one rank was seen, and as
  // many ranks as the HELLOs' world size.
  bool all_done() const;

  // A lost host (net/host_watch.h: its ranks failed with LostHost::line()) in one line, with the
  // ranks that ended by it: "host h2 (ranks 2, 3) lost at step 321: no answer for 10 s; ranks 0,
  // 1 ended with the job". One line per lost host; empty when none was lost.
  std::vector<std::string> failure_lines() const;
  // failure_lines(), diagnosis().lines(), then the slow-transfer line (transfers().slow()):
  // everything the views say in words.
  std::vector<std::string> diagnosis_lines() const;
  // Why `rank` failed, for the views: its reason, except that a rank whose connection ended after
  // a host was lost "ended by the failure of host h2". "" when it has not failed.
  std::string failure_reason(int rank) const;
  // The host `rank` runs on, from its HELLO ("" before one).
  std::string host_of(int rank) const;

  // The per-rank table: rank, coordinates, state, step, loss, memory (current total), comm time,
  // the compute and wait shares of its last steps, last seen (seconds before `now`), host and
  // flags (STRAGGLER, SILENT, FAILED: reason). Under the rows: the diagnosis in words (one line
  // each for the straggler, the bottleneck stage and an uneven layout, with pp >= 2 the busy share
  // of every stage), and when a rank has reported an evaluation the newest: "eval at step 30: loss
  // 0.4123, accuracy 87.5% (1000 samples)".
  std::string table(double now) const;

 private:
  std::map<int, RankState> ranks_;
  std::map<int, telemetry::JobState> before_lost_;  // a lost rank's state before it was lost
  uint64_t events_ = 0;
  uint64_t layouts_ = 0;
  CommStats comm_;
  Timeline timeline_;
  TransferWatch transfers_;
  TimeAccounting time_;
  int pp_ = 1;  // the pipeline depth the HELLOs announce
  int64_t newest_step_ = 0;
  mutable std::optional<Diagnosis> diagnosis_;  // reset by add()
  void capture_step(int64_t step);
  std::map<int64_t, int> step_reports_;  // STEP events per step not yet complete
  std::shared_ptr<const StepReplay> newest_replay_;
};

// Follows the diagnosis as a run unfolds (a replay goes through every step): one entry each time
// who is named changes, nobody included, or the uneven layout's stage does.
struct DiagnosisChange {
  int64_t step = 0;                // the newest step any rank had reported
  std::vector<std::string> lines;  // Diagnosis::lines(); empty: nothing to say any more
};

class DiagnosisTracker {
 public:
  // Looks at `model` once per new step (cheap to call after every message). True when what the
  // diagnosis names (the straggler's rank, the bottleneck's stage) or the uneven layout's stage
  // changed, a kind of group's transfers became slow or recovered (RunModel::transfers), or a
  // host was lost (RunModel::failure_lines, looked at on every call).
  bool update(const RunModel& model);
  const std::vector<DiagnosisChange>& changes() const { return changes_; }

 private:
  int64_t step_ = 0;
  int straggler_ = -1, bottleneck_ = -1, uneven_ = -1;
  std::vector<std::string> failures_;  // failure_lines() when last looked at
  std::string slow_kind_;              // transfers().slow()'s kind ("" none)
  std::vector<DiagnosisChange> changes_;
};

}  // namespace shardlab::net
