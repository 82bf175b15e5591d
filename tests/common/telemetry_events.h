// Telemetry events built by hand, for suites that feed a run model, a timeline or a recording:
// make_event() wraps a payload, EventFeeder hands events with per-rank sequence numbers (as the
// publisher numbers them) to a net::RunModel. Suites derive from EventFeeder to add builders for
// the payloads they use.
#pragma once

#include <cstdint>
#include <map>
#include <utility>

#include "engine/telemetry/events.h"
#include "net/run_model.h"

namespace shardlab::test {

// An event of `rank` at `time` (epoch seconds) carrying `payload`.
inline telemetry::Event make_event(int rank, double time, telemetry::Payload payload,
                                   uint64_t seq = 0) {
  telemetry::Event e;
  e.rank = rank;
  e.seq = seq;
  e.time = time;
  e.payload = std::move(payload);
  return e;
}

class EventFeeder {
 public:
  explicit EventFeeder(net::RunModel& model) : model_(model) {}
  void add(int rank, double time, telemetry::Payload payload) {
    model_.add(net::Message{make_event(rank, time, std::move(payload), seq_[rank]++)});
  }

 private:
  net::RunModel& model_;
  std::map<int, uint64_t> seq_;
};

}  // namespace shardlab::test
