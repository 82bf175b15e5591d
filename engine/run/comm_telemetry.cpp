#include "engine/run/comm_telemetry.h"

#include <chrono>

namespace shardlab {

namespace {

double clock_seconds(Clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

}  // namespace

CommTelemetrySink::CommTelemetrySink(std::function<telemetry::TelemetrySink*(int)> sink_of,
                                     std::optional<Topology> topology)
    : sink_of_(std::move(sink_of)),
      topology_(std::move(topology)),
      epoch_minus_clock_(telemetry::now_seconds() - clock_seconds(Clock::now())) {}

void CommTelemetrySink::on_record(const CommRecord& r) {
  const int rank =
      topology_ ? topology_->world_rank(r.group, r.rank) : (r.group == "world" ? r.rank : -1);
  if (rank < 0 || !sink_of_) return;
  telemetry::TelemetrySink* sink = sink_of_(rank);
  if (!sink) return;
  telemetry::CollectiveEvent c;
  c.op = to_string(r.op);
  c.group = r.group;
  c.bytes = r.bytes;
  c.start = clock_seconds(r.start) + epoch_minus_clock_;
  c.duration = r.seconds();
  c.algbw = r.algbw_gbs();
  c.busbw = r.busbw_gbs();
  c.seq = r.seq;
  c.ok = r.ok;
  c.wait = r.wait;
  // The same numbering on both sides (comm_record.h and events.h say so).
  static_assert(static_cast<int>(CommArray::grads) ==
                static_cast<int>(telemetry::CollectiveArray::grads));
  static_assert(static_cast<int>(CommArray::params) ==
                static_cast<int>(telemetry::CollectiveArray::params));
  c.array = static_cast<telemetry::CollectiveArray>(r.subject.array);
  c.unit = r.subject.unit;
  if (r.last >= 0)
    c.last_rank =
        topology_ ? topology_->world_rank(r.group, r.last) : (r.group == "world" ? r.last : -1);
  telemetry::Event e;
  e.rank = rank;
  e.time = c.start + c.duration;
  e.payload = std::move(c);
  sink->publish(std::move(e));
}

TeeCommSink::TeeCommSink(std::vector<std::shared_ptr<CommSink>> sinks) : sinks_(std::move(sinks)) {}

void TeeCommSink::on_record(const CommRecord& record) {
  for (const auto& s : sinks_)
    if (s) s->on_record(record);
}

}  // namespace shardlab
