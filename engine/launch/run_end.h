// How a run with worker processes ends, judged from what its ranks reported (net::RunModel): the
// rules the app applies to its mpirun and remote modes, kept here so that any front end watching
// a collector ends a run the same way.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "net/run_model.h"

namespace shardlab::launch {

struct RunEnd {
  bool ok = false;
  std::string message;
};

// A local mpirun exited: ok when it exited with status 0 ("finished: WORLD ranks (mpirun exited
// with status 0)"), else "mpirun exited with status N" or "mpirun crashed".
RunEnd mpirun_end(int exit_code, bool crashed, int world);

// Remote workers: once every rank of the HELLOs' world has finished or failed, ok when none
// failed ("finished: N ranks", else "K of N ranks failed (rank R: reason; ...)"); nullopt while
// a rank is still going.
std::optional<RunEnd> remote_end(const net::RunModel& model);

// For a failed mpirun: "; rank R failed: reason" naming the failure that says most, a failure a
// rank reported itself, else the first connection lost (`first_lost`, -1 none: the rank killed
// first; mpirun took the others with it); "" when there is none.
std::string failure_detail(const net::RunModel& model, int first_lost);

// A local run that failed or was stopped took its ranks with it: every rank that never said it
// finished or failed (killed, crashed), and after the user's stop (`stopped`) also one failed only
// because its connection was lost, is marked failed in `model` with "ended without finishing:
// <reason>". Returns those ranks.
std::vector<int> mark_unfinished_failed(net::RunModel& model, const std::string& reason,
                                        bool stopped);

// When a run with workers is over. Its end becomes known when mpirun exits (known()) or, for
// remote workers, when every rank has finished or failed (watch_remote(); unknown again when a
// rank whose connection was lost reconnects). The last messages then get a grace period: due()
// gives the end once every connection has closed or the grace period is over.
class EndWatch {
 public:
  static constexpr std::chrono::milliseconds kGrace{3000};

  void known(RunEnd end);
  // Remote workers, after each batch of messages. True when the end became known just now.
  bool watch_remote(const net::RunModel& model);
  // A rank's connection was lost (the first one names a failed mpirun's cause when no rank
  // reported its own failure).
  void connection_lost(int rank);
  // The end to report once known and (all_closed or the grace period over); a failed mpirun's
  // message with its failure_detail when `detail`. nullopt before.
  std::optional<RunEnd> due(const net::RunModel& model, bool all_closed, bool detail) const;

 private:
  std::optional<RunEnd> end_;
  std::chrono::steady_clock::time_point deadline_{};
  int first_lost_ = -1;
};

}  // namespace shardlab::launch
