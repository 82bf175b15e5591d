#include "engine/bench/synthetic_run.h"

#include <fmt/format.h>

#include <string>

namespace shardlab::bench {

// A rank's HELLO in a pp 2 x tp 2 x dp (R/4) layout.
net::Hello hello_of(int rank, int world) {
  net::Hello h;
  h.job_id = "bench-web";
  h.rank = rank;
  h.world = world;
  h.pp = world >= 4 ? 2 : 1;
  h.tp = world >= 4 ? 2 : 1;
  h.dp = world / (h.pp * h.tp);
  h.tp_i = rank % h.tp;
  h.dp_i = (rank / h.tp) % h.dp;
  h.pp_i = rank / (h.tp * h.dp);
  h.host = fmt::format("node{}", rank / 8);
  h.pid = 1000 + rank;
  return h;
}

// One synthetic step of `rank` ending at `t`: phases, two collectives, memory, the step.
void add_step(net::RunModel& model, int rank, int world, int64_t step, double t,
              double step_seconds) {
  telemetry::Event e;
  e.rank = rank;
  e.time = t;
  const double t0 = t - step_seconds;
  const double jitter = 0.05 * step_seconds * static_cast<double>((rank * 7 + step) % 5);
  auto phase = [&](telemetry::Phase p, double a, double b) {
    telemetry::PhaseEvent ph;
    ph.phase = p;
    ph.stage = hello_of(rank, world).pp_i;
    ph.start = a;
    ph.end = b;
    e.payload = ph;
    model.add(net::Message(e));
  };
  auto collective = [&](const std::string& group, double start, double dur, double wait) {
    telemetry::CollectiveEvent c;
    c.op = "all_reduce";
    c.group = group;
    c.bytes = 1 << 20;
    c.start = start;
    c.duration = dur;
    c.busbw = 2.0;
    c.algbw = 1.5;
    c.wait = wait;
    c.last_rank = rank ^ 1;
    e.payload = c;
    model.add(net::Message(e));
  };
  phase(telemetry::Phase::forward, t0, t0 + 0.3 * step_seconds);
  collective(fmt::format("tp[{}]", rank / 2), t0 + 0.3 * step_seconds, 0.05 * step_seconds,
             jitter * 0.2);
  phase(telemetry::Phase::backward, t0 + 0.35 * step_seconds, t0 + 0.75 * step_seconds);
  collective(fmt::format("dp[{}]", rank % 4), t0 + 0.75 * step_seconds, 0.15 * step_seconds,
             jitter);
  phase(telemetry::Phase::optimizer, t0 + 0.9 * step_seconds, t);
  telemetry::MemoryEvent m;
  m.current = {4 << 20, 4 << 20, 8 << 20, 16 << 20, 1 << 20};
  m.peak = m.current;
  e.payload = m;
  model.add(net::Message(e));
  telemetry::StepEvent s;
  s.step = step;
  s.loss = 4.0 / (1.0 + 0.01 * static_cast<double>(step));
  s.step_seconds = step_seconds;
  e.payload = s;
  model.add(net::Message(e));
}

// A model holding `ranks` ranks that have each done a few steps.
void populate(net::RunModel& model, int ranks) {
  const double now = telemetry::now_seconds();
  for (int r = 0; r < ranks; ++r) model.add(net::Message(hello_of(r, ranks)));
  for (int64_t step = 1; step <= 5; ++step)
    for (int r = 0; r < ranks; ++r)
      add_step(model, r, ranks, step, now - 1.0 + 0.2 * static_cast<double>(step), 0.2);
}

}  // namespace shardlab::bench
