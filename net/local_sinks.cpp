#include "net/local_sinks.h"

namespace shardlab::net {

RecordingSink::RecordingSink(const std::string& path) : writer_(path) {}

void RecordingSink::add_hello(const Hello& hello) {
  std::lock_guard<std::mutex> lock(mu_);
  writer_.append(hello);
}

void RecordingSink::publish(telemetry::Event event) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    event.seq = next_seq_[event.rank]++;
    writer_.append(event);
    ++events_;
  } catch (...) {
    ++failed_;
  }
}

void RecordingSink::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  writer_.flush();
}

uint64_t RecordingSink::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

uint64_t RecordingSink::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

}  // namespace shardlab::net
