// How ShardLab judges that a sharded run trained the same model as one process: the rule behind
// `shardlab run --verify` and the equivalence suites, written once.
//
// Why not a fixed tolerance. A sharded run adds the same numbers as one process in another order
// (each rank sums its own samples, the collective sums the ranks; tensor parallelism splits the
// feature sums), and the BLAS kernel OpenBLAS picks for the CPU changes the order again. Most
// parameters then differ in their last bit or two. But Adam, RMSprop and Adagrad divide by the
// gradient's RMS plus eps: a gradient element that cancels to within about eps of zero at some
// step is stepped by lr * g / eps, so its rounding error (about u * sum |terms|) is amplified by
// lr / eps (3e5 for lr 3e-3, eps 1e-8) into a parameter difference that can reach a fraction of
// lr. Which elements land there depends on the data, the layout and the kernel; a fixed 1e-5 after
// a few Adam steps held on some CPUs and failed on others.
//
// The rule. The noise floor is measured on the job itself: the single-process run is repeated with
// its global batch cut into micro-batches (gradient accumulation) in up to kCuts ways — the cut
// the sharded layout makes (dp x micro-batches, or world x accumulation) and the smallest other
// divisor of the batch — and once with each batch's samples in reverse order (a kernel that sums
// in order and accumulates into the gradient can make contiguous cuts add exactly as the whole
// batch does; reversal reorders under every kernel). Those runs are the same computation in
// another summation order,
// so their spread (the largest difference between any two of them and the reference) is how far
// reordering alone moves this job on this CPU and kernel. A sharded run is equivalent when it is
// within kNoiseMultiple times that floor of the reference, or within kRoundings * sqrt(steps)
// roundings, whichever is larger. The floor itself must stay below kFloorCeiling: the reordered
// runs share gradient accumulation with the 1-D strategies, and a mistake there must not inflate
// the floor that judges it. A real mistake (a missing reduction, a gradient counted twice, a
// dropped scale, a damaged shard) is caught by orders of magnitude: tests/parallel shows each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/job/job_spec.h"
#include "engine/job/build.h"
#include "engine/train/trainer.h"

namespace shardlab {

// max |a - b| / max |b| over all elements (|a - b| when b is all zeros); infinity when the sizes
// differ or an element is NaN.
double max_rel_diff(std::span<const float> a, std::span<const float> b);
double max_rel_diff(std::span<const double> a, std::span<const double> b);

// A run of the job on one process with everything compared: final parameters, every step's loss
// and pre-clip gradient norm, the final evaluation loss.
struct RunFigures {
  TrainResult result;
  std::vector<double> grad_norms;
  std::vector<float> initial;  // the parameters before the first step
};

// Trains `setup` (build_training's result) and returns its figures: run_training, or the GPU
// trainer for a cuda job (passed in by the caller, which links it).
using SingleRunner = std::function<TrainResult(TrainingSetup&, const TrainerCallbacks&)>;
// reversed: each batch's samples in reverse order (TrainerCallbacks::reorder_batch; the CPU
// Trainer honours it, the GPU trainer does not).
RunFigures run_figures(const JobSpec& single, const SingleRunner& runner, bool reversed = false);

// How far training moved the parameters: max_rel_diff(final, initial). A comparison is only
// meaningful when this is well above its tolerance (a run that never stepped would pass
// otherwise); the suites and --verify require kMinMovement times the tolerance.
double training_movement(const RunFigures& run);
inline constexpr double kMinMovement = 10;

// The same job as one process: strategy none, world 1, default parallel options, no checkpoints.
JobSpec single_process_job(const JobSpec& job);

// The micro-batch counts (train.accumulation_steps of the single-process job) the noise floor is
// measured with: the number of pieces `job`'s layout cuts each global batch into (world x
// accumulation_steps, or dp x micro_batches with pp or tp > 1) when that is more than one, then
// the smallest other divisors of the batch above one, kCuts cuts in all where the batch has that
// many divisors; never the reference's own accumulation_steps (no reordering of it).
// Empty when the batch has no other divisor (1 sample, or a prime batch already cut that way).
inline constexpr size_t kCuts = 2;
std::vector<int64_t> reordering_cuts(const JobSpec& job);

// How far the reordered single-process runs ended from the reference: each figure is the largest
// max_rel_diff over the cuts.
struct NoiseFloor {
  std::vector<int64_t> cuts;  // as reordering_cuts
  bool reversed = false;      // and a run with each batch's samples in reverse order
  double params = 0;
  double losses = 0;
  double grad_norms = 0;
  double eval_loss = 0;
};
NoiseFloor measure_noise_floor(const JobSpec& job, const RunFigures& reference,
                               const SingleRunner& runner);

// The rule's constants.
// kNoiseMultiple: in an eps event the sharded run's rounding at the element is one more random
// draw of the same size as the reordered runs' draws; over the 3D suite's 41 rows under eight
// OpenBLAS kernels (Prescott, Core2, Atom, Nehalem, Sandybridge, Haswell, Zen, SkylakeX) it came
// to at most 3.5 times the family's spread (and bulk rounding in the tp rows to 5.8 times, where
// the rounding term below governs); the worst row ended at 0.22 of its tolerance. A skipped
// gradient reduction still lands 2,000 times above the resulting tolerance.
// kRoundings: without any eps event two correct runs differ by roundings of the last bit
// (2^-24 relative to the largest parameter) that each step adds to the parameters and the
// gradients; independent from step to step, they add like a random walk, so sqrt(steps). 16
// covers the few roundings per element a step makes, with room.
inline constexpr double kNoiseMultiple = 16;
inline constexpr double kRoundings = 16;
inline constexpr double kUnitRoundoff = 0x1p-24;  // float32: half the spacing at 1.0

// The largest spread a family of reorderings of one computation may have: beyond it the
// reordered runs did not do the same computation (gradient accumulation, which they share with
// the 1-D strategies, is broken, so a floor measured with it would hide the mistake) or the run
// is too chaotic at this length for a tight check. 25 times the largest spread seen (3.7e-5, an
// eps event in a 5-step Adam run of the 3D suite); accumulation without its 1/A scale puts the
// gradient norms' spread at 1.
inline constexpr double kFloorCeiling = 1e-3;
// Whether every figure of `floor` is within kFloorCeiling; otherwise `why` names the first that
// is not.
bool floor_is_consistent(const NoiseFloor& floor, std::string* why = nullptr);

// max(kNoiseMultiple * floor, kRoundings * sqrt(steps) * 2^-24).
double equivalence_tolerance(double floor, int64_t steps);

// The four tolerances of one comparison, from one floor.
struct Tolerances {
  double params = 0, losses = 0, grad_norms = 0, eval_loss = 0;
};
Tolerances equivalence_tolerances(const NoiseFloor& floor, int64_t steps);

// "noise floor 2.7e-06 from the batch cut into 3 and 2 micro-batches in one process"
std::string describe(const NoiseFloor& floor);

}  // namespace shardlab
