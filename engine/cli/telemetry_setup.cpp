#include "engine/cli/telemetry_setup.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "engine/parallel/parallel_config.h"
#include "engine/parallel/topology.h"
#include "net/auth.h"
#include "net/job_hello.h"
#include "net/local_sinks.h"
#include "net/publisher.h"
#include "net/run_paths.h"

namespace shardlab::cli {

struct RunTelemetry::Impl {
  std::unique_ptr<net::RecordingSink> recording;
  std::map<int, std::unique_ptr<net::Publisher>> publishers;
  std::map<int, std::unique_ptr<net::FanoutSink>> sinks;
  std::string recording_path;
  bool closed = false;
};

std::string default_recording_path(const JobSpec& job) {
  return fmt::format("{}/{}.slrec", net::runs_dir(), net::recording_base_name(job.name));
}

RunTelemetry::RunTelemetry(const Args& args, const JobSpec& job, const std::vector<int>& ranks,
                           bool record_by_default)
    : impl_(std::make_unique<Impl>()) {
  if (args.has("--record") && args.has("--no-record"))
    SL_THROW(UsageError, "--record and --no-record contradict each other");
  // --telemetry / --token-file, else the job's telemetry section.
  const std::string address = args.get("--telemetry", job.telemetry.address);
  const std::string token_file = args.get("--token-file", job.telemetry.token_file);
  if (!address.empty()) {
    net::PublisherOptions base;
    net::parse_host_port(address, base.host, base.port);
    base.token = net::find_token(token_file);
    for (int r : ranks) {
      net::PublisherOptions o = base;
      o.hello = net::hello_for(job, r);
      impl_->publishers[r] = std::make_unique<net::Publisher>(std::move(o));
    }
  } else if (args.has("--token-file")) {
    SL_THROW(UsageError, "--token-file only applies with --telemetry HOST:PORT");
  }
  const bool record = args.has("--record") || (record_by_default && !args.has("--no-record"));
  if (record) {
    impl_->recording_path = args.get("--record", default_recording_path(job));
    const std::filesystem::path dir = std::filesystem::path(impl_->recording_path).parent_path();
    std::error_code ec;
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
    impl_->recording = std::make_unique<net::RecordingSink>(impl_->recording_path);
    for (int r : ranks) impl_->recording->add_hello(net::hello_for(job, r));
  }
  for (int r : ranks) {
    std::vector<telemetry::TelemetrySink*> to;
    if (impl_->recording) to.push_back(impl_->recording.get());
    if (auto it = impl_->publishers.find(r); it != impl_->publishers.end())
      to.push_back(it->second.get());
    if (!to.empty()) impl_->sinks[r] = std::make_unique<net::FanoutSink>(std::move(to));
  }
}

RunTelemetry::~RunTelemetry() {
  try {
    close();
  } catch (...) {
  }
}

bool RunTelemetry::active() const {
  return !impl_->sinks.empty();
}

telemetry::TelemetrySink* RunTelemetry::sink(int rank) {
  auto it = impl_->sinks.find(rank);
  return it == impl_->sinks.end() ? nullptr : it->second.get();
}

std::function<telemetry::TelemetrySink*(int)> RunTelemetry::sink_of() {
  if (!active()) return {};
  return [this](int rank) { return sink(rank); };
}

const std::string& RunTelemetry::recording_path() const {
  return impl_->recording_path;
}

void RunTelemetry::close() {
  if (impl_->closed) return;
  impl_->closed = true;
  uint64_t dropped = 0, sent = 0, published = 0;
  std::string error;
  // One shared deadline: every publisher starts closing, then each is waited for.
  for (auto& [rank, p] : impl_->publishers) p->begin_close();
  for (auto& [rank, p] : impl_->publishers) {
    p->close();
    dropped += p->dropped();
    sent += p->sent();
    published += p->published();
    if (error.empty()) error = p->last_error();
  }
  if (!impl_->publishers.empty()) {
    const uint64_t unsent = published > sent ? published - sent : 0;
    fmt::print("telemetry: {} events streamed{}{}\n", sent,
               dropped ? fmt::format(", {} dropped (queue full)", dropped) : std::string(),
               unsent ? fmt::format(", {} not delivered ({})", unsent,
                                    error.empty() ? "collector unreachable" : error)
                      : std::string());
  }
  if (impl_->recording) {
    impl_->recording->flush();
    fmt::print("telemetry: recorded {} events to {}{}\n", impl_->recording->events(),
               impl_->recording_path,
               impl_->recording->failed()
                   ? fmt::format(" ({} could not be written)", impl_->recording->failed())
                   : std::string());
  }
  std::fflush(stdout);
}

}  // namespace shardlab::cli
