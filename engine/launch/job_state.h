// The job state a single-process run publishes around its training (the ranks of a sharded run
// publish their own, engine/run/rank_runner.h): running, then finished, or failed with the
// reason when the body throws. One publisher of JOB_STATE events: publish_job_state.
#pragma once

#include <exception>
#include <utility>

#include "engine/run/rank_runner.h"

namespace shardlab::launch {

// Publishes JOB_STATE running on `sink` (rank 0; nothing when null), runs `body`, then finished;
// failed with e.what() when it throws (rethrown).
template <class F>
auto with_job_state(telemetry::TelemetrySink* sink, F&& body) {
  publish_job_state(sink, 0, telemetry::JobState::running);
  try {
    auto r = std::forward<F>(body)();
    publish_job_state(sink, 0, telemetry::JobState::finished);
    return r;
  } catch (const std::exception& e) {
    publish_job_state(sink, 0, telemetry::JobState::failed, e.what());
    throw;
  }
}

}  // namespace shardlab::launch
