// RecordingSink: a TelemetrySink that keeps every event it is given, in publish order (so each
// rank's events stay in the order its thread published them), for the suites that check what
// ranks publish; it can wake a waiter on the first StepEvent.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <variant>
#include <vector>

#include "engine/telemetry/sink.h"

namespace shardlab::ptest {

class RecordingSink : public telemetry::TelemetrySink {
 public:
  void publish(telemetry::Event event) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    if (std::holds_alternative<telemetry::StepEvent>(event.payload)) {
      ++steps_;
      cv_.notify_all();
    }
    events_.push_back(std::move(event));
  }

  // Waits until at least one StepEvent has arrived; false after `timeout` without one.
  bool wait_for_step(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return steps_ > 0; });
  }

  // Every event of world rank `rank`, in the order published.
  std::vector<telemetry::Event> of_rank(int rank) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<telemetry::Event> out;
    for (const telemetry::Event& e : events_)
      if (e.rank == rank) out.push_back(e);
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<telemetry::Event> events_;
  int64_t steps_ = 0;
};

}  // namespace shardlab::ptest
