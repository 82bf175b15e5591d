// TelemetrySink: the engine's only window to the outside (resources/docs/design.md). The engine
// hands events to a sink and never waits for it: publish() must return at once (a network sink
// queues and drops when full; see net/publisher.h). Nothing in engine/ knows about sockets.
#pragma once

#include "engine/telemetry/events.h"

namespace shardlab::telemetry {

class TelemetrySink {
 public:
  virtual ~TelemetrySink() = default;
  // Takes the event. Never blocks for long and never throws; thread-safe.
  virtual void publish(Event event) noexcept = 0;
  // Called on the rank's own thread after each PhaseEvent it published (publish_phase,
  // engine/train/step_telemetry.h). The one call that may hold the rank: a teaching sink
  // (engine/telemetry/teaching_gate.h) waits there while its viewer has the run paused. Never
  // throws.
  virtual void after_phase(int /*rank*/, Phase /*phase*/) noexcept {}
};

}  // namespace shardlab::telemetry
