#include "engine/cli/telemetry_setup.h"

#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "engine/launch/threads_run.h"
#include "engine/launch/workers.h"
#include "net/auth.h"
#include "net/publisher.h"

namespace shardlab::cli {

namespace {

launch::SinkOptions sink_options(const Args& args, const JobSpec& job, bool record_by_default,
                                 const RunDashboard* dashboard) {
  check_record_path(args);
  if (args.has("--record") && args.has("--no-record"))
    SL_THROW(UsageError, "--record and --no-record contradict each other");
  launch::SinkOptions o;
  if (dashboard) {
    o.address = dashboard->telemetry_address();
    o.token = dashboard->token();
    if (args.has("--record") || (record_by_default && !args.has("--no-record")))
      o.record_path = args.get("--record", launch::default_recording_path(job));
    return o;
  }
  // --telemetry / --token-file, else the job's telemetry section.
  o.address = args.get("--telemetry", job.telemetry.address);
  const std::string token_file = args.get("--token-file", job.telemetry.token_file);
  if (!o.address.empty()) {
    std::string host;
    uint16_t port = 0;
    net::parse_host_port(o.address, host, port);
    o.token = net::find_token(token_file);
  } else if (args.has("--token-file"))
    SL_THROW(UsageError, "--token-file only applies with --telemetry HOST:PORT");
  if (args.has("--record") || (record_by_default && !args.has("--no-record")))
    o.record_path = args.get("--record", launch::default_recording_path(job));
  return o;
}

// --http: a collector of this run's own, serving the dashboard.
std::unique_ptr<RunDashboard> make_dashboard(const Args& args, const JobSpec& job,
                                             std::shared_ptr<TeachingGate> teaching) {
  const std::optional<HttpAddress> http = http_address(args);
  if (!http) {
    if (teaching)
      fmt::print(
          "teaching: every rank waits after each phase for a viewer to step it on, and there is "
          "none (give --http, or run the job from the app): the run goes on after {:g} s\n",
          job.telemetry.teaching_timeout_s);
    return nullptr;
  }
  if (args.has("--telemetry") || !job.telemetry.address.empty())
    SL_THROW(UsageError,
             "--http serves this run's own collector, but the run streams to another one "
             "(--telemetry or the job's telemetry.address): give --http to that `shardlab "
             "monitor` instead");
  return std::make_unique<RunDashboard>(*http, job, "", "127.0.0.1:0", std::move(teaching));
}

}  // namespace

void check_record_path(const Args& args) {
  if (!args.has("--record") || args.has("--force")) return;
  const std::string path = args.get("--record");
  std::error_code ec;
  if (std::filesystem::symlink_status(path, ec).type() != std::filesystem::file_type::not_found)
    SL_THROW(UsageError, "--record: {} already exists (give --force to replace it)", path);
}

RunTelemetry::RunTelemetry(const Args& args, const launch::PreparedJob& job,
                           const std::vector<int>& ranks, bool record_by_default)
    : teaching_(launch::teaching_gate(job.job)),
      dashboard_(make_dashboard(args, job.job, teaching_)),
      sinks_(job, ranks, sink_options(args, job.job, record_by_default, dashboard_.get())) {}

RunTelemetry::~RunTelemetry() {
  try {
    close();
  } catch (...) {
  }
}

void RunTelemetry::close() {
  if (closed_) return;
  closed_ = true;
  const launch::SinksClosed r = sinks_.close();
  if (dashboard_) dashboard_->finish();  // every event is in: the page has seen the end
  if (r.streamed)
    fmt::print("telemetry: {} events streamed{}{}\n", r.sent,
               r.dropped ? fmt::format(", {} dropped (queue full)", r.dropped) : std::string(),
               r.not_delivered ? fmt::format(", {} not delivered ({})", r.not_delivered,
                                             r.error.empty() ? "collector unreachable" : r.error)
                               : std::string());
  if (r.recorded)
    fmt::print("telemetry: recorded {} events to {}{}\n", r.recorded_events, r.record_path,
               r.record_failures ? fmt::format(" ({} could not be written)", r.record_failures)
                                 : std::string());
  std::fflush(stdout);
}

}  // namespace shardlab::cli
