#include "engine/bench/harness.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "engine/core/error.h"
#include "engine/core/timer.h"

namespace shardlab::bench {

std::vector<double> sample_seconds(int warmup, int reps, const std::function<double()>& measure) {
  SL_ENFORCE(warmup >= 0, "bench: warm-up runs must be >= 0, got {}", warmup);
  SL_ENFORCE(reps >= 1, "bench: timed runs must be >= 1, got {}", reps);
  for (int w = 0; w < warmup; ++w) (void)measure();
  std::vector<double> seconds;
  seconds.reserve(static_cast<size_t>(reps));
  for (int r = 0; r < reps; ++r) seconds.push_back(std::max(measure(), kMinSeconds));
  return seconds;
}

std::vector<double> time_each(int warmup, int reps, const std::function<void()>& work) {
  return sample_seconds(warmup, reps, [&] {
    Stopwatch sw;
    work();
    return sw.seconds();
  });
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double best(const std::vector<double>& values) {
  return values.empty() ? 0 : *std::min_element(values.begin(), values.end());
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace shardlab::bench
