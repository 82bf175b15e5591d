#include "engine/cli/verify.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdio>

#include "engine/cli/args.h"
#include "engine/core/error.h"
#include "engine/run/device_training.h"
#include "engine/job/build.h"
#include "engine/job/equivalence.h"

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

bool verify_against_single_process(const JobSpec& job, std::span<const float> sharded,
                                   double tolerance) {
  const JobSpec single = single_process_job(job);
  // A GPU job's reference runs on one GPU (the same kernels; only the data-parallel sum order
  // differs), not on the CPU, whose BLAS sums in another order.
  const bool gpu = single.device == "cuda";
  const SingleRunner runner = [gpu](TrainingSetup& s, const TrainerCallbacks& cb) {
    return gpu ? run_device_training(s, cb) : run_training(s, cb);
  };
  fmt::print("verify: running the same job {} without sharding...\n",
             gpu ? "on one GPU" : "in one process");
  std::fflush(stdout);
  const RunFigures ref = run_figures(single, runner);
  SL_ENFORCE(sharded.size() == ref.result.params.size(),
             "verify: the sharded run has {} parameters, the same job in one process {}",
             sharded.size(), ref.result.params.size());
  const double d = max_rel_diff(sharded, ref.result.params);
  std::string basis;
  if (tolerance > 0) {
    basis = "given with --tolerance";
  } else {
    if (job.train.batch_size > 1) {
      fmt::print(
          "verify: measuring the noise floor: the same job {} with its batch cut into "
          "micro-batches and in reverse order...\n",
          gpu ? "on one GPU" : "in one process");
      std::fflush(stdout);
    }
    const NoiseFloor floor = measure_noise_floor(job, ref, runner);
    std::string why;
    if (!floor_is_consistent(floor, &why)) {
      fmt::print("verify: max_rel_diff={:.3e} INCONCLUSIVE: {}\n", d, why);
      std::fflush(stdout);
      return false;
    }
    tolerance = equivalence_tolerance(floor.params, ref.result.steps);
    const double moved = training_movement(ref);
    if (!(moved > kMinMovement * tolerance)) {
      fmt::print(
          "verify: max_rel_diff={:.3e} INCONCLUSIVE: training moved the parameters by only {:.3e}, "
          "not {:g} times the tolerance {:.3e}, so a run that never stepped would pass too (train "
          "more steps or a larger optimizer.lr)\n",
          d, moved, kMinMovement, tolerance);
      std::fflush(stdout);
      return false;
    }
    basis = fmt::format("{}; tolerance = max({:g} x floor, {:g} roundings x sqrt({} steps))",
                        describe(floor), kNoiseMultiple, kRoundings, ref.result.steps);
  }
  const bool ok = d <= tolerance;
  fmt::print("verify: max_rel_diff={:.3e} tolerance={:.3e} ({}) {}\n", d, tolerance, basis,
             ok ? "OK" : "FAIL");
  std::fflush(stdout);
  return ok;
}

}  // namespace shardlab::cli
