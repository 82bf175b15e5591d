#include "engine/launch/run_collector.h"

#include "engine/launch/run_sinks.h"
#include "net/auth.h"
#include "net/consumers.h"
#include "net/publisher.h"

namespace shardlab::launch {

RunCollector::RunCollector(const CollectorRunOptions& options) : token_(net::make_token()) {
  net::CollectorOptions co;
  net::parse_host_port(options.listen, host_, port_, "listen", true);
  co.address = host_;
  co.port = port_;
  co.token = token_;
  co.log = options.log;
  std::vector<net::MessageConsumer*> consumers = options.consumers;
  if (!options.record_path.empty()) {
    record_path_ = options.record_path;
    make_parent_dir(record_path_);
    recording_ = std::make_unique<net::RecordingConsumer>(record_path_);
    consumers.push_back(recording_.get());
  }
  collector_ = std::make_unique<net::Collector>(co, consumers);
  port_ = collector_->port();
  collector_->start();
}

RunCollector::~RunCollector() {
  try {
    finish();
  } catch (...) {
  }
}

net::CollectorStats RunCollector::stats() const {
  return collector_->stats();
}

uint64_t RunCollector::finish() {
  if (finished_) return recorded_;
  finished_ = true;
  collector_->settle_hosts();
  collector_->stop();
  if (recording_) {
    recording_->writer().flush();
    recorded_ = recording_->writer().messages();
  }
  return recorded_;
}

}  // namespace shardlab::launch
