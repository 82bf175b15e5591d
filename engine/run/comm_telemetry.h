// Communication records as telemetry: a CommSink that turns every CommRecord of a job's
// communicators (the world and the tp/pp/dp groups a Topology builds) into a CollectiveEvent on
// the sink of the world rank that made the call; and TeeCommSink, which hands each record to
// several sinks (e.g. CommTotalsSink and this one).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "engine/comm/comm_record.h"
#include "engine/telemetry/sink.h"
#include "engine/topology/topology.h"

namespace shardlab {

class CommTelemetrySink : public CommSink {
 public:
  // sink_of(world rank) gives the rank's sink (null: that rank publishes nothing). With a
  // topology, records of its tp[i]/pp[i]/dp[i] groups are mapped to world ranks; without one only
  // the "world" group's are published.
  CommTelemetrySink(std::function<telemetry::TelemetrySink*(int)> sink_of,
                    std::optional<Topology> topology);
  void on_record(const CommRecord& record) override;

 private:
  std::function<telemetry::TelemetrySink*(int)> sink_of_;
  std::optional<Topology> topology_;
  double epoch_minus_clock_;  // epoch seconds - Clock seconds, measured once
};

class TeeCommSink : public CommSink {
 public:
  explicit TeeCommSink(std::vector<std::shared_ptr<CommSink>> sinks);
  void on_record(const CommRecord& record) override;

 private:
  std::vector<std::shared_ptr<CommSink>> sinks_;
};

}  // namespace shardlab
