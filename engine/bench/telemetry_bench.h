// What `shardlab bench telemetry` measures, apart from how it prints it: the cost of publish() on
// a rank's thread, and the demo job trained with telemetry off and on (each rank a Publisher to
// an in-process collector that feeds a RunModel and records to a file). The collector's ingest
// rate is in ingest_bench.h.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "engine/data/datasets.h"
#include "engine/job/job_spec.h"
#include "engine/telemetry/events.h"
#include "engine/telemetry/sink.h"

namespace shardlab::bench {

// resources/jobs/fashion_mlp.json (spelled out so that the command does not depend on the working
// directory), shortened to `steps` and without evaluation.
JobSpec demo_job(int64_t steps);

// One training run of the overhead comparison.
struct OverheadRun {
  bool telemetry = false;
  double train_seconds = 0;
  uint64_t published = 0, sent = 0, dropped = 0, received = 0, recorded = 0;
  bool all_finished = false;  // every rank reported finished at the last step
};

// `job` on its threads, with telemetry off, or on: every rank publishing to an in-process
// collector that feeds a RunModel and records to `recording_path` (removed afterwards).
OverheadRun run_once(const JobSpec& job, const Datasets& data, bool telemetry_on,
                     const std::string& recording_path);

// A STEP event as the training loop makes one.
telemetry::Event step_event(int64_t step);

// Mean nanoseconds per publish() over `events` calls made in chunks of 1,000; between chunks
// (untimed) the sink's thread is given time to take them, so the queue never fills. `drained`
// says whether the sink has taken all published so far.
double publish_ns(telemetry::TelemetrySink& sink, int64_t events,
                  const std::function<bool()>& drained);

}  // namespace shardlab::bench
