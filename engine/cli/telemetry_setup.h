// Telemetry for `shardlab run` and `shardlab worker`: where each rank's events go, from the
// command line (the sinks themselves are the launch layer's, engine/launch/run_sinks.h).
//
//   --telemetry HOST:PORT   stream to a collector (`shardlab monitor`, or the app); the token comes
//                           from SHARDLAB_TELEMETRY_TOKEN or --token-file FILE
//   --record PATH           record to PATH; `run` records to runs/<time>-<job>-<pid>.slrec by
//   default
//                           ($SHARDLAB_RUNS_DIR instead of runs/ when set),
//   --no-record             which this turns off; --record never replaces an existing file
//                           unless --force is given
//   --http ADDR:PORT        (run only) the web dashboard of this run: the ranks also stream to a
//                           collector in this process, which serves it (web_setup.h)
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/cli/args.h"
#include "engine/cli/web_setup.h"
#include "engine/launch/prepared_job.h"
#include "engine/launch/run_sinks.h"
#include "engine/telemetry/sink.h"

namespace shardlab::cli {

class RunTelemetry {
 public:
  // Sinks for world ranks `ranks` of `job` (a threads run: all of them; a worker: its own).
  // record_by_default: whether to record when neither --record nor --no-record is given.
  RunTelemetry(const Args& args, const launch::PreparedJob& job, const std::vector<int>& ranks,
               bool record_by_default);
  ~RunTelemetry();  // close(), also when the run failed
  RunTelemetry(const RunTelemetry&) = delete;
  RunTelemetry& operator=(const RunTelemetry&) = delete;

  bool active() const { return sinks_.active(); }
  // The sink of a world rank (null when the rank has none).
  telemetry::TelemetrySink* sink(int rank) { return sinks_.sink(rank); }
  std::function<telemetry::TelemetrySink*(int)> sink_of() { return sinks_.sink_of(); }
  // A teaching run's gate (job.telemetry.teaching; null otherwise), which --http's page steps on:
  // RankRunOptions::teaching.
  const std::shared_ptr<TeachingGate>& teaching() const { return teaching_; }
  // Flushes publishers (bounded) and the recording; prints where the recording went and any
  // dropped events. Idempotent.
  void close();

 private:
  std::shared_ptr<TeachingGate> teaching_;   // before dashboard_: its page steps it on
  std::unique_ptr<RunDashboard> dashboard_;  // before sinks_: they stream to it
  launch::RunSinks sinks_;
  bool closed_ = false;
};

// --record PATH names a file that exists and --force is not given: UsageError (a recording is
// never overwritten by accident). Nothing without --record.
void check_record_path(const Args& args);

// The ArgSpec entries `run` and `worker` accept for telemetry.
inline const char* const kTelemetryOptions[] = {"--telemetry", "--token-file", "--record"};

}  // namespace shardlab::cli
