#include "engine/telemetry/events.h"

#include <chrono>

namespace shardlab::telemetry {

const char* to_string(CollectiveArray array) {
  switch (array) {
    case CollectiveArray::params:
      return "params";
    case CollectiveArray::grads:
      return "grads";
    default:
      return "unknown";
  }
}

const char* to_string(Phase phase) {
  switch (phase) {
    case Phase::forward:
      return "forward";
    case Phase::backward:
      return "backward";
    case Phase::optimizer:
      return "optimizer";
  }
  return "unknown";
}

const char* to_string(JobState state) {
  switch (state) {
    case JobState::starting:
      return "starting";
    case JobState::running:
      return "running";
    case JobState::finished:
      return "finished";
    case JobState::failed:
      return "failed";
  }
  return "unknown";
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace shardlab::telemetry
