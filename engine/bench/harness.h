// What every benchmark of `shardlab bench` measures with: repeated timings after a warm-up, the
// median and best of them, and how many cores this process may use. One copy, so that every
// bench's "median" and "cores" mean the same thing.
#pragma once

#include <functional>
#include <vector>

namespace shardlab::bench {

// The floor of one timing: a clock tick of zero on a tiny workload would make a rate infinite.
inline constexpr double kMinSeconds = 1e-9;

// Calls `measure` `warmup` times, discarding the results (page faults, caches, clocks, first
// launches), then `reps` times, keeping each result (seconds, raised to kMinSeconds). `measure`
// times one run itself (a host stopwatch, or GPU events around the work). Throws InvalidArgument
// for warmup < 0 or reps < 1.
std::vector<double> sample_seconds(int warmup, int reps, const std::function<double()>& measure);

// sample_seconds with a host stopwatch around each call of `work`.
std::vector<double> time_each(int warmup, int reps, const std::function<void()>& work);

// The median of `values` (the mean of the middle two for an even count); 0 for none.
double median(std::vector<double> values);

// The smallest of `values`; 0 for none.
double best(const std::vector<double>& values);

// The cores this process may run on (its CPU affinity mask, which taskset, cgroups and batch
// schedulers narrow; the hardware's count where the mask cannot be read); at least 1.
int usable_cores();

}  // namespace shardlab::bench
