// Monotonic wall-clock helpers for progress lines, benchmarks and (later) communication records.
#pragma once

#include <chrono>

namespace shardlab {

using Clock = std::chrono::steady_clock;

class Stopwatch {
 public:
  Stopwatch() : start_(Clock::now()) {}
  void reset() { start_ = Clock::now(); }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  Clock::time_point start_;
};

}  // namespace shardlab
