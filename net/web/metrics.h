// /metrics: the run in the Prometheus text exposition format 0.0.4, for a Prometheus server to
// scrape and Grafana to chart. Every metric is documented in README.md ("Prometheus metrics").
//
// Per rank (labels job, rank, pp, tp, dp, host; a rank whose HELLO has not come has no coordinates
// and is left out):
//   shardlab_step                  gauge    the rank's latest step
//   shardlab_loss                  gauge    its latest training loss
//   shardlab_step_seconds          gauge    its latest step's seconds
//   shardlab_comm_seconds_total    counter  seconds in collectives, label kind: tp, pp, dp, world
//   shardlab_memory_bytes          gauge    bytes held now, label category: params, grads,
//                                           optimizer_state, activations, comm
//   shardlab_rank_up               gauge    1 while the rank runs (starting or running and not
//                                           silent), 0 otherwise
//   shardlab_straggler             gauge    1 for the rank the diagnosis names slow, else 0
// The collector's own (label job):
//   shardlab_collector_events_total    counter  events the run model has taken in
//   shardlab_collector_connections     gauge    telemetry connections open now
// Note: a Prometheus server renames a scraped `job` label to `exported_job` unless the scrape
// config says honor_labels: true (its own `job` label names the scrape job).
#pragma once

#include <cstdint>
#include <string>

#include "net/run_model.h"

namespace shardlab::net {

struct MetricsInput {
  const RunModel& model;
  std::string job;           // the `job` label ("" the HELLOs' job id)
  double now = 0;            // for silence (epoch seconds)
  uint64_t connections = 0;  // telemetry connections open now
};

std::string prometheus_metrics(const MetricsInput& in);

// The exposition format's Content-Type.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace shardlab::net
