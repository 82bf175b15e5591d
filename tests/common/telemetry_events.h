// Telemetry events built by hand, for suites that feed a run model, a timeline or a recording:
// grid_hello() places a rank in a pp x tp x dp grid, make_event() wraps a payload, make_step()
// is a training step's payload, EventFeeder hands events with per-rank sequence numbers (as the
// publisher numbers them) to a net::RunModel. Suites derive from EventFeeder to add builders for
// the payloads they use.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "engine/telemetry/events.h"
#include "net/run_model.h"

namespace shardlab::test {

// The HELLO of `rank` of job `job`, one of `world` ranks in a pp x tp x dp grid, its coordinates
// from rank = (pp_i * tp + tp_i) * dp + dp_i. Host and pid are left to the suite.
inline net::Hello grid_hello(const std::string& job, int rank, int world, int pp, int tp, int dp) {
  net::Hello h;
  h.job_id = job;
  h.rank = rank;
  h.world = world;
  h.pp = pp;
  h.tp = tp;
  h.dp = dp;
  h.dp_i = rank % dp;
  h.tp_i = (rank / dp) % tp;
  h.pp_i = rank / (dp * tp);
  return h;
}

// Step n's payload: its loss and seconds, at lr 0.01 and 100 samples a second.
inline telemetry::StepEvent make_step(int64_t n, double loss, double seconds) {
  telemetry::StepEvent s;
  s.step = n;
  s.loss = loss;
  s.lr = 0.01;
  s.throughput = 100;
  s.step_seconds = seconds;
  return s;
}

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
