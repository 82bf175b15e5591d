#include "engine/launch/run_sinks.h"

#include <filesystem>
#include <map>

#include "net/local_sinks.h"
#include "net/publisher.h"

namespace shardlab::launch {

struct RunSinks::Impl {
  std::unique_ptr<net::RecordingSink> recording;
  std::map<int, std::unique_ptr<net::Publisher>> publishers;
  std::map<int, std::unique_ptr<net::FanoutSink>> sinks;
  std::string record_path;
  bool closed = false;
  SinksClosed report;
};

void make_parent_dir(const std::string& path) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
}

RunSinks::RunSinks(const PreparedJob& job, const std::vector<int>& ranks,
                   const SinkOptions& options)
    : impl_(std::make_unique<Impl>()) {
  if (!options.address.empty()) {
    net::PublisherOptions base;
    net::parse_host_port(options.address, base.host, base.port);
    base.token = options.token;
    for (int r : ranks) {
      net::PublisherOptions o = base;
      o.hello = job.hello(r);
      impl_->publishers[r] = std::make_unique<net::Publisher>(std::move(o));
    }
  }
  if (!options.record_path.empty()) {
    impl_->record_path = options.record_path;
    make_parent_dir(options.record_path);
    impl_->recording = std::make_unique<net::RecordingSink>(options.record_path);
    for (int r : ranks) impl_->recording->add_hello(job.hello(r));
  }
  for (int r : ranks) {
    std::vector<telemetry::TelemetrySink*> to;
    if (impl_->recording) to.push_back(impl_->recording.get());
    if (auto it = impl_->publishers.find(r); it != impl_->publishers.end())
      to.push_back(it->second.get());
    to.insert(to.end(), options.also.begin(), options.also.end());
    if (!to.empty()) impl_->sinks[r] = std::make_unique<net::FanoutSink>(std::move(to));
  }
}

RunSinks::~RunSinks() {
  try {
    close();
  } catch (...) {
  }
}

bool RunSinks::active() const {
  return !impl_->sinks.empty();
}

telemetry::TelemetrySink* RunSinks::sink(int rank) {
  auto it = impl_->sinks.find(rank);
  return it == impl_->sinks.end() ? nullptr : it->second.get();
}

std::function<telemetry::TelemetrySink*(int)> RunSinks::sink_of() {
  if (!active()) return {};
  return [this](int rank) { return sink(rank); };
}

const std::string& RunSinks::record_path() const {
  return impl_->record_path;
}

SinksClosed RunSinks::close() {
  SinksClosed& r = impl_->report;
  if (impl_->closed) return r;
  impl_->closed = true;
  uint64_t published = 0;
  // One shared deadline: every publisher starts closing, then each is waited for.
  for (auto& [rank, p] : impl_->publishers) p->begin_close();
  for (auto& [rank, p] : impl_->publishers) {
    p->close();
    r.dropped += p->dropped();
    r.sent += p->sent();
    published += p->published();
    if (r.error.empty()) r.error = p->last_error();
  }
  r.streamed = !impl_->publishers.empty();
  r.not_delivered = published > r.sent ? published - r.sent : 0;
  if (impl_->recording) {
    r.recorded = true;
    r.record_path = impl_->record_path;
    impl_->recording->flush();
    r.recorded_events = impl_->recording->events();
    r.record_failures = impl_->recording->failed();
  }
  return r;
}

}  // namespace shardlab::launch
