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
};

}  // namespace shardlab::telemetry
