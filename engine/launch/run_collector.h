// RunCollector: the collector a run's worker processes stream to, with its token and recording:
// on loopback for the mpirun mode (`shardlab run` with backend mpi, the app's mpirun mode), on the
// address the user gives for remote workers (the app's remote mode). The collector serves on its
// own thread (net/collector.h); the consumers given are called there.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/collector.h"

namespace shardlab::net {
class RecordingConsumer;
}

namespace shardlab::launch {

struct CollectorRunOptions {
  // Where to listen, HOST:PORT (port 0: any free port, see port()); loopback unless asked.
  std::string listen = "127.0.0.1:0";
  // Record every message here ("" none); the folder is created.
  std::string record_path;
  // Also handed every message (the app's queue); must outlive the collector.
  std::vector<net::MessageConsumer*> consumers;
  // One line per closed or refused connection (CollectorOptions::log).
  std::function<void(const std::string&)> log;
};

class RunCollector {
 public:
  // Makes a fresh token, binds (IoError naming the address when it cannot; InvalidArgument for a
  // malformed `listen`, named "listen"), opens the recording and starts serving.
  explicit RunCollector(const CollectorRunOptions& options);
  ~RunCollector();  // finish(), errors swallowed
  RunCollector(const RunCollector&) = delete;
  RunCollector& operator=(const RunCollector&) = delete;

  uint16_t port() const { return port_; }
  // The host part of `listen` ("" for any address).
  const std::string& host() const { return host_; }
  // The job's token: workers get it through SHARDLAB_TELEMETRY_TOKEN or a 0600 file, never on a
  // command line.
  const std::string& token() const { return token_; }
  const std::string& record_path() const { return record_path_; }
  net::CollectorStats stats() const;
  // The hosts found lost (net::Collector::lost_hosts), also after finish().
  std::vector<std::string> lost_hosts() const { return collector_->lost_hosts(); }
  // The collector itself (to serve more on its io_context: the web dashboard).
  net::Collector& collector() { return *collector_; }
  // Names the hosts lost with the job (net::Collector::settle_hosts: the job has ended), stops
  // serving (every connection closed; the consumers have seen their last message) and flushes
  // the recording. Returns the messages recorded (0 without a recording). Idempotent;
  // throws IoError when the recording cannot be written.
  uint64_t finish();

 private:
  std::string host_, token_, record_path_;
  uint16_t port_ = 0;
  std::unique_ptr<net::RecordingConsumer> recording_;
  std::unique_ptr<net::Collector> collector_;
  bool finished_ = false;
  uint64_t recorded_ = 0;
};

}  // namespace shardlab::launch
