// The threads mode: every rank of a prepared job as a thread of this process. run_threads() runs
// in the foreground (`shardlab run`); ThreadsRun runs in the background (the app, whose event
// loop must stay free) and can be stopped.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "engine/launch/prepared_job.h"
#include "engine/run/rank_runner.h"
#include "engine/train/stop_request.h"

namespace shardlab::launch {

// The gate of a job's teaching mode (engine/telemetry/teaching_gate.h): one for its world when
// job.telemetry.teaching, else null.
std::shared_ptr<TeachingGate> teaching_gate(const JobSpec& job);

// run_threads_job on the prepared job: its data (loaded), communication options and topology.
ParallelRunResult run_threads(const PreparedJob& prepared, const RankRunOptions& options = {});

class ThreadsRun {
 public:
  // Starts the run on a thread of its own. The job's data is read there (load_data), so a missing
  // file ends the run, failed, with the reason. `telemetry` gives each world rank's sink (it and
  // the sinks must outlive the run).
  ThreadsRun(PreparedJob prepared, std::function<telemetry::TelemetrySink*(int)> telemetry);
  // Stops the run (stop()) and joins it: the ranks end at their next step boundary, a step's
  // collectives bounded by the communication timeout. A teaching run is released (its gate
  // closed) so it can get there.
  ~ThreadsRun();
  ThreadsRun(const ThreadsRun&) = delete;
  ThreadsRun& operator=(const ThreadsRun&) = delete;

  // Every rank ends after the same step; the run then finishes normally (StopRequest).
  // Idempotent.
  void stop();
  // The run has ended; ok() and message() are then final.
  bool done() const { return done_.load(); }
  // Waits for the run to end (done()).
  void join();
  // Whether the run finished (stopped or not) rather than failed.
  bool ok() const { return ok_; }
  // "finished: 4 ranks, 30 steps, 1.2 s of training", "stopped after 12 steps (...): 4 ranks,
  // ...", or the error that ended it.
  const std::string& message() const { return message_; }
  // The run's teaching gate (job.telemetry.teaching), or null: the viewer's Next phase, Next step
  // and Run go there.
  const std::shared_ptr<TeachingGate>& teaching() const { return teaching_; }

 private:
  StopRequest stop_;
  std::shared_ptr<TeachingGate> teaching_;
  bool ok_ = false;  // written by the run's thread before done_ is set, read after
  std::string message_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace shardlab::launch
