// `--http ADDR:PORT` on `shardlab run`, `monitor` and `replay`: the web dashboard, /api/run and
// /metrics (net/web/web_server.h) served beside the run's collector. Port 0 picks a free port; the
// URL is printed ("web: dashboard at http://127.0.0.1:40123/"). On loopback anyone on this machine
// may look; on any other address every request needs the job's token (the login page, or
// Authorization: Bearer for scripts and Prometheus).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "engine/cli/args.h"
#include "engine/job/job_spec.h"
#include "net/web/web_server.h"

namespace shardlab::net {
class Collector;
class RunModel;
class RunModelConsumer;
}  // namespace shardlab::net
namespace shardlab::launch {
class RunCollector;
}

namespace shardlab::cli {

struct HttpAddress {
  std::string host;
  uint16_t port = 0;
};

// --http's address, when given (UsageError for a malformed one).
std::optional<HttpAddress> http_address(const Args& args);

// What the page knows beyond the events: the job's name and every rank's planned memory (none when
// the planner cannot plan it; the page then shows measured memory only).
net::DashboardInfo dashboard_info(const JobSpec& job, const std::string& mode);

// dashboard_info() of the job in `job_file` as a run prepares it (`monitor --job`, `replay --job`).
net::DashboardInfo planned_info(const std::string& job_file, const std::string& mode);

// The token a collector (`monitor`) or a web server off loopback (`replay`) expects:
// SHARDLAB_TELEMETRY_TOKEN, or --token-file FILE (an explicit file wins; created with a fresh
// token when missing), or a fresh one written to ./shardlab-monitor.token. `who` prefixes the
// lines saying which ("monitor: using the token in ...").
std::string collector_token(const Args& args, const std::string& who);

// The web server's options for `where` (the token required off loopback) and its log on stderr.
net::WebOptions web_options(const HttpAddress& where, const std::string& token);

// A web server on `collector`'s io_context showing `model` (which the collector feeds), started,
// and closed when the collector stops. Prints the URL on stdout.
// `teaching`: a teaching run's gate, which the page steps on (net::WebContent::teaching).
std::unique_ptr<net::WebServer> serve_live(const HttpAddress& where, net::Collector& collector,
                                           const net::RunModel& model, net::DashboardInfo info,
                                           const std::string& token,
                                           std::shared_ptr<TeachingGate> teaching = nullptr);

// "web: 2 viewers, 431 frames, 1.2 MB sent (5.1 KB/s per viewer)" on stdout, after close().
void print_web_stats(const net::WebServer& web);

// `shardlab run --http`: a collector on loopback that the run's ranks stream to (threads: each
// rank's publisher; mpi: the workers), its run model, recording (optional) and the web server.
class RunDashboard {
 public:
  // `collector_listen`: where the ranks' collector listens (loopback unless the ranks run on
  // other hosts).
  RunDashboard(const HttpAddress& where, const JobSpec& job, const std::string& record_path,
               const std::string& collector_listen = "127.0.0.1:0",
               std::shared_ptr<TeachingGate> teaching = nullptr);
  ~RunDashboard();
  RunDashboard(const RunDashboard&) = delete;
  RunDashboard& operator=(const RunDashboard&) = delete;
  // Where the ranks stream to ("127.0.0.1:PORT", or the collector_listen host) and with which
  // token.
  std::string telemetry_address() const;
  const std::string& token() const;
  // Stops the collector and the web server (after the run's sinks are closed: every event in).
  // Returns the messages recorded. Idempotent.
  uint64_t finish();
  const std::string& record_path() const;
  // The hosts its collector found lost (net::Collector::lost_hosts).
  std::vector<std::string> lost_hosts() const;

 private:
  std::unique_ptr<net::RunModelConsumer> model_;
  std::unique_ptr<launch::RunCollector> collector_;
  std::unique_ptr<net::WebServer> web_;
  bool finished_ = false;
  uint64_t recorded_ = 0;
};

}  // namespace shardlab::cli
