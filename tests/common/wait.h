// Polling with a deadline, for suites that wait on another thread or process without a signal to
// wait on (never a wait without a timeout).
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace shardlab::test {

// Polls pred every 5 ms until it holds or `timeout` has passed; returns its last answer.
inline bool wait_for(const std::function<bool()>& pred,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

}  // namespace shardlab::test
