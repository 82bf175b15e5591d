#include "engine/cli/web_setup.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "engine/core/error.h"
#include "engine/launch/hosts.h"
#include "engine/launch/prepared_job.h"
#include "engine/launch/run_collector.h"
#include "engine/plan/memory/planner.h"
#include "net/auth.h"
#include "net/collector.h"
#include "net/consumers.h"
#include "net/publisher.h"

namespace shardlab::cli {

std::optional<HttpAddress> http_address(const Args& args) {
  if (!args.has("--http")) return std::nullopt;
  HttpAddress a;
  try {
    net::parse_host_port(args.get("--http"), a.host, a.port, "--http", true);
  } catch (const InvalidArgument& e) {
    SL_THROW(UsageError, "{}", e.what());
  }
  return a;
}

std::string collector_token(const Args& args, const std::string& who) {
  // An explicit --token-file wins over the variable (as for the workers).
  if (const char* env = std::getenv(net::kTokenEnv); env && *env && !args.has("--token-file")) {
    fmt::print(stderr, "{}: using the token in {}\n", who, net::kTokenEnv);
    return net::find_token("");
  }
  const std::string path = args.get("--token-file", "shardlab-monitor.token");
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    fmt::print(stderr, "{}: using the token in {}\n", who, path);
    return net::read_token_file(path);
  }
  const std::string token = net::make_token();
  net::write_token_file(path, token);
  fmt::print(stderr,
             "{}: wrote a new token to {} (workers: --token-file {} or {}=<its contents>)\n", who,
             path, path, net::kTokenEnv);
  return token;
}

net::DashboardInfo planned_info(const std::string& job_file, const std::string& mode) {
  // The job as a run prepares it (a gpt job's vocabulary from its corpus), so the plan is the
  // run's own.
  const launch::PreparedJob prepared = launch::prepare_job(load_job(job_file));
  return dashboard_info(prepared.job, mode);
}

net::DashboardInfo dashboard_info(const JobSpec& job, const std::string& mode) {
  net::DashboardInfo info;
  info.mode = mode;
  info.job_name = job.name;
  try {
    for (const MemoryFigures& f : plan_job_memory(job.model, job.optimizer, job.parallel).steady)
      info.planned.push_back(f.bytes);
  } catch (const Error&) {
    info.planned.clear();  // (a gpt job whose vocabulary comes from its corpus, unread here)
  }
  return info;
}

net::WebOptions web_options(const HttpAddress& where, const std::string& token) {
  net::WebOptions o;
  o.address = where.host;
  o.port = where.port;
  o.token = token;
  o.require_token = !net::is_loopback(where.host);
  o.log = [](const std::string& line) { fmt::print(stderr, "web: {}\n", line); };
  return o;
}

std::unique_ptr<net::WebServer> serve_live(const HttpAddress& where, net::Collector& collector,
                                           const net::RunModel& model, net::DashboardInfo info,
                                           const std::string& token,
                                           std::shared_ptr<TeachingGate> teaching) {
  net::WebContent content;
  content.teaching = std::move(teaching);
  content.info = std::move(info);
  content.live = &model;
  content.connections = [&collector] { return collector.stats().open; };
  auto web = std::make_unique<net::WebServer>(collector.io_context(), web_options(where, token),
                                              std::move(content));
  collector.on_stop(web->closer());
  web->start();
  fmt::print("web: dashboard at {}{}\n", web->url(),
             net::is_loopback(where.host)
                 ? std::string()
                 : " (not loopback: sign in with the job's token; scripts send Authorization: "
                   "Bearer TOKEN)");
  std::fflush(stdout);
  return web;
}

void print_web_stats(const net::WebServer& web) {
  const net::WebStats st = web.stats();
  fmt::print(
      "web: {} requests, {} frames, {:.1f} KB sent to viewers{}\n", st.requests, st.frames,
      static_cast<double>(st.bytes) / 1e3,
      st.viewer_seconds > 0
          ? fmt::format(" ({:.1f} KB/s per viewer over {:.0f} viewer-seconds)",
                        static_cast<double>(st.bytes) / 1e3 / st.viewer_seconds, st.viewer_seconds)
          : std::string());
  std::fflush(stdout);
}

RunDashboard::RunDashboard(const HttpAddress& where, const JobSpec& job,
                           const std::string& record_path, const std::string& collector_listen,
                           std::shared_ptr<TeachingGate> teaching)
    : model_(std::make_unique<net::RunModelConsumer>()) {
  launch::CollectorRunOptions co;
  co.listen = collector_listen;
  co.record_path = record_path;
  co.consumers = {model_.get()};
  co.log = [](const std::string& line) { fmt::print(stderr, "telemetry: {}\n", line); };
  collector_ = std::make_unique<launch::RunCollector>(co);
  web_ = serve_live(where, collector_->collector(), model_->model(), dashboard_info(job, "live"),
                    collector_->token(), std::move(teaching));
  if (!net::is_loopback(where.host)) {
    // Off loopback the page asks for the token: the user needs it in a file only they can read.
    const std::string path = "shardlab-web.token";
    net::write_token_file(path, collector_->token());
    fmt::print("web: the dashboard's token is in {} (mode 0600)\n", path);
  }
}

RunDashboard::~RunDashboard() {
  try {
    finish();
  } catch (...) {
  }
}

std::string RunDashboard::telemetry_address() const {
  const std::string& host = collector_->host().empty() ? "127.0.0.1" : collector_->host();
  return launch::host_port(host, collector_->port());
}

const std::string& RunDashboard::token() const {
  return collector_->token();
}

const std::string& RunDashboard::record_path() const {
  return collector_->record_path();
}

std::vector<std::string> RunDashboard::lost_hosts() const {
  return collector_->lost_hosts();
}

uint64_t RunDashboard::finish() {
  if (finished_) return recorded_;
  finished_ = true;
  recorded_ = collector_->finish();
  print_web_stats(*web_);
  return recorded_;
}

}  // namespace shardlab::cli
