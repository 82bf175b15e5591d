#include "net/local_sinks.h"

namespace shardlab::net {

RecordingSink::RecordingSink(const std::string& path, size_t queue_capacity)
    : writer_(path), queue_(queue_capacity) {
  thread_ = std::thread([this] { loop(); });
}

RecordingSink::~RecordingSink() {
  {
    std::lock_guard lock(wake_mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  try {
    flush();
  } catch (...) {
    // Counted by the writer's failure; a destructor must not throw.
  }
}

void RecordingSink::add_hello(const Hello& hello) {
  std::lock_guard lock(mu_);
  drain();  // the rank's events queued before it (none, if called first) stay first
  writer_.append(hello);
}

void RecordingSink::publish(telemetry::Event event) noexcept {
  if (!queue_.push(event)) failed_.fetch_add(1, std::memory_order_relaxed);
}

void RecordingSink::drain() {
  telemetry::Event event;
  while (queue_.pop(event)) {
    try {
      event.seq = next_seq_[event.rank]++;
      writer_.append(event);
      events_.fetch_add(1, std::memory_order_relaxed);
    } catch (...) {
      failed_.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

void RecordingSink::loop() {
  std::unique_lock wake(wake_mu_);
  while (!stop_) {
    wake_.wait_for(wake, kDrainInterval, [this] { return stop_; });
    wake.unlock();
    {
      std::lock_guard lock(mu_);
      drain();
    }
    wake.lock();
  }
}

void RecordingSink::flush() {
  std::lock_guard lock(mu_);
  drain();
  writer_.flush();
}

}  // namespace shardlab::net
