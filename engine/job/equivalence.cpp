#include "engine/job/equivalence.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/core/error.h"

namespace shardlab {

namespace {

template <typename T>
double rel_diff(std::span<const T> a, std::span<const T> b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();  // never "close"
    num = std::max(num, d);
    den = std::max(den, std::fabs(static_cast<double>(b[i])));
  }
  const double r = den > 0 ? num / den : num;
  return std::isnan(r) ? std::numeric_limits<double>::infinity() : r;  // inf / inf: not close
}

// The larger of two differences, an infinite one (a NaN turned into infinity) winning.
void widen(double& floor, double d) {
  floor = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(floor, d);
}

// Pieces each global batch of `job` is cut into by its layout.
int64_t layout_pieces(const JobSpec& job) {
  const ParallelConfig& p = job.parallel;
  if (p.strategy == "none" || p.world_size <= 1) return job.train.accumulation_steps;
  if (p.pp > 1 || p.tp > 1) {
    // parallel.dp may be left at -1: world_size / (pp * tp).
    const int64_t dp = p.dp > 0 ? p.dp : p.world_size / std::max<int64_t>(p.pp * p.tp, 1);
    return dp * p.micro_batches;
  }
  return p.world_size * job.train.accumulation_steps;
}

}  // namespace

double max_rel_diff(std::span<const float> a, std::span<const float> b) {
  return rel_diff(a, b);
}

double max_rel_diff(std::span<const double> a, std::span<const double> b) {
  return rel_diff(a, b);
}

JobSpec single_process_job(const JobSpec& job) {
  JobSpec single = job;
  single.parallel = ParallelConfig{};
  // One process saves no checkpoints of a sharded run.
  single.train.checkpoint_dir.clear();
  single.train.checkpoint_every = TrainConfig{}.checkpoint_every;
  single.train.keep_checkpoints = TrainConfig{}.keep_checkpoints;
  return single;
}

RunFigures run_figures(const JobSpec& single, const SingleRunner& runner, bool reversed) {
  RunFigures f;
  TrainingSetup setup = build_training(single);
  f.initial = setup.model->params_to_host();
  TrainerCallbacks cb;
  if (reversed)
    cb.reorder_batch = [](std::vector<int64_t>& indices) {
      std::reverse(indices.begin(), indices.end());
    };
  cb.on_step = [&f](const StepInfo& info) { f.grad_norms.push_back(info.grad_norm); };
  f.result = runner(setup, cb);
  return f;
}

std::vector<int64_t> reordering_cuts(const JobSpec& job) {
  const int64_t batch = job.train.batch_size;
  std::vector<int64_t> cuts;
  // The reference's own accumulation is no reordering of it.
  const int64_t own = single_process_job(job).train.accumulation_steps;
  const int64_t pieces = layout_pieces(job);
  if (pieces > 1 && pieces != own && batch % pieces == 0) cuts.push_back(pieces);
  for (int64_t d = 2; d <= batch && cuts.size() < kCuts; ++d)
    if (batch % d == 0 && d != own && (cuts.empty() || cuts[0] != d)) cuts.push_back(d);
  return cuts;
}

NoiseFloor measure_noise_floor(const JobSpec& job, const RunFigures& reference,
                               const SingleRunner& runner) {
  NoiseFloor floor;
  floor.cuts = reordering_cuts(job);
  // The reference and every reordered run: the floor is the largest difference between any two
  // (the family's spread), relative to the reference's magnitude.
  std::vector<RunFigures> family;
  for (int64_t cut : floor.cuts) {
    JobSpec single = single_process_job(job);
    single.train.accumulation_steps = cut;
    family.push_back(run_figures(single, runner));
  }
  // Contiguous cuts of a kernel that sums its K dimension in order, accumulating into the
  // gradient, can add in exactly the reference's order (power-of-two cuts then scale exactly):
  // the reversed batch changes the order under every kernel.
  if (job.train.batch_size > 1) {
    family.push_back(run_figures(single_process_job(job), runner, /*reversed=*/true));
    floor.reversed = true;
  }
  auto spread = [&](const RunFigures& a, const RunFigures& b) {
    widen(floor.params, max_rel_diff(a.result.params, b.result.params));
    widen(floor.losses, max_rel_diff(a.result.losses, b.result.losses));
    widen(floor.grad_norms, max_rel_diff(a.grad_norms, b.grad_norms));
    if (a.result.evals.empty() != b.result.evals.empty()) {
      widen(floor.eval_loss, std::numeric_limits<double>::infinity());
    } else if (!a.result.evals.empty()) {
      const double x = a.result.final_eval().loss, y = b.result.final_eval().loss;
      widen(floor.eval_loss,
            max_rel_diff(std::span<const double>(&x, 1), std::span<const double>(&y, 1)));
    }
  };
  for (size_t i = 0; i < family.size(); ++i) {
    spread(family[i], reference);
    for (size_t j = 0; j < i; ++j) spread(family[i], family[j]);
  }
  return floor;
}

double training_movement(const RunFigures& run) {
  return max_rel_diff(run.result.params, run.initial);
}

bool floor_is_consistent(const NoiseFloor& floor, std::string* why) {
  const std::pair<const char*, double> figures[] = {{"parameters", floor.params},
                                                    {"losses", floor.losses},
                                                    {"gradient norms", floor.grad_norms},
                                                    {"evaluation loss", floor.eval_loss}};
  for (const auto& [name, value] : figures) {
    if (value <= kFloorCeiling) continue;  // (NaN is not)
    if (why)
      *why = fmt::format(
          "the single-process runs with the batch cut into micro-batches or reversed differ from "
          "the plain run in their {} by {:.3g} (more than {:g}): gradient accumulation does not "
          "compute the same gradients, or the job is too chaotic at this length for a tight "
          "check (try fewer steps)",
          name, value, kFloorCeiling);
    return false;
  }
  return true;
}

double equivalence_tolerance(double floor, int64_t steps) {
  const double roundings =
      kRoundings * std::sqrt(static_cast<double>(std::max<int64_t>(steps, 1))) * kUnitRoundoff;
  return std::max(kNoiseMultiple * floor, roundings);
}

Tolerances equivalence_tolerances(const NoiseFloor& floor, int64_t steps) {
  return {equivalence_tolerance(floor.params, steps), equivalence_tolerance(floor.losses, steps),
          equivalence_tolerance(floor.grad_norms, steps),
          equivalence_tolerance(floor.eval_loss, steps)};
}

std::string describe(const NoiseFloor& floor) {
  std::vector<std::string> ways;
  if (!floor.cuts.empty()) {
    std::string cuts;
    for (size_t i = 0; i < floor.cuts.size(); ++i) {
      if (i > 0) cuts += i + 1 == floor.cuts.size() ? " and " : ", ";
      cuts += std::to_string(floor.cuts[i]);
    }
    ways.push_back(fmt::format("the batch cut into {} micro-batches", cuts));
  }
  if (floor.reversed) ways.emplace_back("its samples in reverse order");
  if (ways.empty()) return "no noise floor: a batch of one sample has no other order";
  return fmt::format("noise floor {:.2e}: one process with {}", floor.params,
                     ways.size() == 1 ? ways[0] : ways[0] + ", and with " + ways[1]);
}

}  // namespace shardlab
