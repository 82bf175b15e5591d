#include "engine/cli/verify.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "engine/cli/args.h"
#include "engine/core/error.h"
#include "engine/device/device_training.h"
#include "engine/train/build.h"

namespace shardlab::cli {

double parse_tolerance(const std::string& text) {
  double t = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, t);
  if (ec != std::errc() || ptr != end || !std::isfinite(t) || t <= 0)
    SL_THROW(UsageError, "--tolerance: expected a positive finite number such as 1e-5, got '{}'",
             text);
  return t;
}

double max_rel_diff(std::span<const float> a, std::span<const float> b) {
  SL_ENFORCE(a.size() == b.size(), "verify: {} parameters against {}", a.size(), b.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

bool verify_against_single_process(const JobSpec& job, std::span<const float> sharded,
                                   double tolerance) {
  JobSpec single = job;
  single.parallel = ParallelConfig{};
  // The reference saves no checkpoints (one process cannot).
  single.train.checkpoint_dir.clear();
  single.train.checkpoint_every = TrainConfig{}.checkpoint_every;
  single.train.keep_checkpoints = TrainConfig{}.keep_checkpoints;
  // A GPU job's reference runs on one GPU (the same kernels; only the data-parallel sum order
  // differs), not on the CPU, whose BLAS sums in another order.
  const bool gpu = single.device == "cuda";
  fmt::print("verify: running the same job {} without sharding...\n",
             gpu ? "on one GPU" : "in one process");
  std::fflush(stdout);
  TrainingSetup setup = build_training(single);
  const TrainResult ref = gpu ? run_device_training(setup) : run_training(setup);
  const double d = max_rel_diff(sharded, ref.params);
  const bool ok = d <= tolerance;
  fmt::print("verify: max_rel_diff={:.3e} tolerance={:g} {}\n", d, tolerance, ok ? "OK" : "FAIL");
  std::fflush(stdout);
  return ok;
}

}  // namespace shardlab::cli
