// Collector ingest, measured: one Collector (its io_context on one thread) with the given
// consumers, and one raw loopback connection that does the handshake by hand and then writes
// pre-encoded event frames as fast as the kernel takes them. Used by `shardlab bench telemetry`.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/telemetry/events.h"
#include "net/collector.h"

namespace shardlab::net {

// `n` STEP events of world rank `rank`, seq 0..n-1 a millisecond apart from now, encoded back to
// back (the `frames` of measure_ingest): copies of `step`, numbered from `first_step`, the loss
// falling slowly.
std::vector<uint8_t> encode_steps(int32_t rank, int64_t n, int64_t first_step,
                                  telemetry::StepEvent step = {});

// Seconds from the first event byte written until the collector has handed all `events` frames
// of `frames` (event frames of world rank `rank`, seq 0, 1, ...) to its consumers. Throws IoError
// when the collector refuses the connection or stops making progress for 10 s.
// `ready`, when given, runs once the collector serves and before the first event is written (to
// attach more to its io_context: `shardlab bench web` connects dashboard viewers there).
double measure_ingest(const std::vector<uint8_t>& frames, int64_t events, int32_t rank,
                      std::vector<MessageConsumer*> consumers,
                      const std::function<void(Collector&)>& ready = {});

}  // namespace shardlab::net
