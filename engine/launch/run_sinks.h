// RunSinks: where the in-process ranks' telemetry goes (a threads run, a single-process run, one
// worker's rank): a recording written in this process, a publisher per rank streaming to a
// collector, and any sinks of the caller's own (the app's queue), fanned out per rank. One set of
// rules for `shardlab run`, `shardlab worker` and the app.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/launch/prepared_job.h"
#include "engine/telemetry/sink.h"

namespace shardlab::launch {

struct SinkOptions {
  std::string address;      // HOST:PORT of a collector to stream to ("" none)
  std::string token;        // its token (net/auth.h find_token)
  std::string record_path;  // record here ("" none); its folder is created
  // Every rank's events also go to these (the app's queue); they must outlive the run.
  std::vector<telemetry::TelemetrySink*> also;
};

// What close() found: for the lines `shardlab` prints.
struct SinksClosed {
  bool streamed = false;  // there were publishers
  uint64_t sent = 0, dropped = 0, not_delivered = 0;
  std::string error;      // the first publisher's last error ("" none)
  bool recorded = false;  // there was a recording
  uint64_t recorded_events = 0, record_failures = 0;
  std::string record_path;
};

class RunSinks {
 public:
  // Sinks for world ranks `ranks` of `job` (a threads run: all of them; a worker: its own); the
  // recording starts with their HELLOs, and each publisher announces its rank's.
  RunSinks(const PreparedJob& job, const std::vector<int>& ranks, const SinkOptions& options);
  ~RunSinks();  // close(), errors swallowed
  RunSinks(const RunSinks&) = delete;
  RunSinks& operator=(const RunSinks&) = delete;

  bool active() const;
  // The sink of a world rank (null when the rank has none).
  telemetry::TelemetrySink* sink(int rank);
  // sink() as RankRunOptions::telemetry wants it (empty when no rank has a sink).
  std::function<telemetry::TelemetrySink*(int)> sink_of();
  const std::string& record_path() const;
  // Flushes the publishers (one bounded deadline for all) and the recording. Idempotent: the
  // second call returns what the first found. Throws IoError when the recording cannot be written.
  SinksClosed close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Creates the folder of `path` (if any); errors are left to whoever opens the file.
void make_parent_dir(const std::string& path);

}  // namespace shardlab::launch
