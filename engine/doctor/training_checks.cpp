#include <optional>

#include "engine/doctor/training_checks.h"

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "engine/core/device.h"
#include "engine/core/memory.h"
#include "engine/doctor/gpu_fixtures.h"
#include "engine/doctor/sharing_checks.h"
#include "engine/job/build.h"
#include "engine/job/equivalence.h"
#include "engine/plan/memory/planner.h"
#include "engine/run/device_training.h"

namespace shardlab::doctor {
namespace {

TrainResult cpu_runner(TrainingSetup& s, const TrainerCallbacks& cb) {
  return run_training(s, cb);
}
TrainResult gpu_runner(TrainingSetup& s, const TrainerCallbacks& cb) {
  return run_device_training(s, cb);
}

std::vector<double> eval_losses(const TrainResult& r) {
  std::vector<double> out;
  for (const EvalResult& e : r.evals) out.push_back(e.loss);
  return out;
}

JobSpec on(JobSpec job, const std::string& device) {
  job.device = device;
  return job;
}

// `gpu_job` trained on the GPU(s) against the same job in one process on the CPU, under the
// --verify rule.
void verify_case(CheckList& out, const std::string& name, const JobSpec& gpu_job) {
  judge_against_cpu(out, name, gpu_job,
                    [&gpu_job] { return run_figures(gpu_job, gpu_runner).result; });
}

struct OptimizerCase {
  const char* name;
  std::function<void(JobSpec&)> set;
};

}  // namespace

void judge_against_cpu(CheckList& out, const std::string& name, const JobSpec& job,
                       const std::function<TrainResult()>& run) {
  const JobSpec on_cpu = on(job, "cpu");
  const RunFigures ref = run_figures(single_process_job(on_cpu), cpu_runner);
  // The cuts of the job's layout (ranks x accumulation, micro-batches), run on the CPU.
  const NoiseFloor floor = measure_noise_floor(on_cpu, ref, cpu_runner);
  std::string why;
  if (!floor_is_consistent(floor, &why)) {
    out.push_back(failed("training", name, "the CPU's reordered runs disagree: " + why));
    return;
  }
  const Tolerances tol = equivalence_tolerances(floor, ref.result.steps);
  const double moved = training_movement(ref);
  if (!(moved > kMinMovement * tol.params)) {
    out.push_back(failed("training", name,
                         fmt::format("inconclusive: training moved the parameters by only {:.3e}, "
                                     "not {:g} times the tolerance {:.3e}",
                                     moved, kMinMovement, tol.params)));
    return;
  }
  const TrainResult got = run();
  const std::string basis = describe(floor);
  out.push_back(bounded("training", name + ": final parameters", "max rel diff",
                        max_rel_diff(got.params, ref.result.params), tol.params, basis));
  out.push_back(bounded(
      "training", name + ": every step's loss", "max rel diff",
      max_rel_diff(std::span<const double>(got.losses), std::span<const double>(ref.result.losses)),
      tol.losses, basis));
  const std::vector<double> ge = eval_losses(got), ce = eval_losses(ref.result);
  out.push_back(bounded("training", name + ": evaluation losses", "max rel diff",
                        max_rel_diff(std::span<const double>(ge), std::span<const double>(ce)),
                        tol.eval_loss, basis));
}

CheckList training_checks(int device) {
  CheckList out;
  if (std::string why = gpu_skip_reason(device); !why.empty()) {
    out.push_back(skipped("training", "GPU against CPU training", why));
    return out;
  }
  (void)device;  // strategy none trains on GPU 0, ddp on GPUs 0..n-1 (run_device_training)
  std::unique_ptr<SyntheticImages> images;
  guarded(out, "training", "synthetic data set",
          [&](CheckList&) { images = std::make_unique<SyntheticImages>(); });
  if (!images) return out;
  const JobSpec mlp = mlp_check_job(images->dir());
  const std::vector<OptimizerCase> cases = {
      {"mlp adam", [](JobSpec&) {}},
      {"mlp sgd momentum nesterov",
       [](JobSpec& j) {
         j.optimizer = OptimizerConfig{};
         j.optimizer.name = "sgd";
         j.optimizer.lr = 0.05;
         j.optimizer.momentum = 0.9;
         j.optimizer.nesterov = true;
         j.optimizer.weight_decay = 1e-4;
       }},
      {"mlp adamw",
       [](JobSpec& j) {
         j.optimizer = OptimizerConfig{};
         j.optimizer.name = "adamw";
         j.optimizer.weight_decay = 0.1;
       }},
      {"mlp rmsprop momentum",
       [](JobSpec& j) {
         j.optimizer = OptimizerConfig{};
         j.optimizer.name = "rmsprop";
         j.optimizer.momentum = 0.5;
         j.optimizer.weight_decay = 1e-4;
       }},
      {"mlp adagrad",
       [](JobSpec& j) {
         j.optimizer = OptimizerConfig{};
         j.optimizer.name = "adagrad";
         j.optimizer.lr = 0.05;
         j.optimizer.eps = 1e-10;
         j.optimizer.initial_accumulator = 0.1;
       }},
      {"mlp adam accumulation 2 clip 1.0",
       [](JobSpec& j) {
         j.train.accumulation_steps = 2;
         j.train.clip_grad_norm = 1.0;
       }},
  };
  for (const OptimizerCase& c : cases) {
    JobSpec job = mlp;
    c.set(job);
    guarded(out, "training", c.name,
            [&](CheckList& o) { verify_case(o, c.name, on(job, "cuda")); });
  }
  guarded(out, "training", "gpt adamw", [&](CheckList& o) {
    const JobSpec gpt = gpt_check_job();
    verify_case(o, "gpt adamw", on(gpt, "cuda"));
  });

  // ddp over NCCL, world 1, against the single-GPU run.
  guarded(out, "training", "ddp over nccl on one GPU", [&](CheckList& o) {
    JobSpec single = on(mlp, "cuda");
    JobSpec ddp = single;
    ddp.parallel.strategy = "ddp";
    ddp.parallel.world_size = 1;
    const RunFigures a = run_figures(single, gpu_runner);
    const RunFigures b = run_figures(ddp, gpu_runner);
    o.push_back(bounded("training", "ddp over nccl on one GPU: final parameters", "max rel diff",
                        max_rel_diff(b.result.params, a.result.params), 0,
                        "against the single-GPU run: an all-reduce of one rank and a scale by "
                        "1/1 change no bit"));
  });
  // ddp on every GPU of the node against the CPU.
  const int gpus = usable_gpus(nullptr);
  if (gpus < 2) {
    out.push_back(skipped("training", "ddp over nccl on every GPU",
                          fmt::format("needs two GPUs, this node has {}", gpus)));
  } else {
    guarded(out, "training", "ddp over nccl on every GPU", [&](CheckList& o) {
      JobSpec job = mlp;
      job.train.batch_size = 32 * gpus;
      job.train.accumulation_steps = 2;
      job.train.clip_grad_norm = 1.0;
      JobSpec ddp = on(job, "cuda");
      ddp.parallel.strategy = "ddp";
      ddp.parallel.world_size = gpus;
      verify_case(o, fmt::format("ddp over nccl on {} GPUs", gpus), ddp);
    });
  }
  const CheckList shared = shared_device_checks("cuda");
  out.insert(out.end(), shared.begin(), shared.end());
  return out;
}

CheckList memory_checks(int device) {
  CheckList out;
  if (std::string why = gpu_skip_reason(device); !why.empty()) {
    out.push_back(skipped("memory", "device memory ledger", why));
    return out;
  }
  guarded(out, "memory", "device memory ledger", [&](CheckList& o) {
    const SyntheticImages images;
    JobSpec job = mlp_check_job(images.dir(), "cuda");
    job.train.steps = 3;
    MemoryLedger ledger;
    const LedgerScope bind(&ledger);
    MemoryFigures during;
    TrainerCallbacks cb;
    cb.on_step = [&](const StepInfo&) {
      for (int c = 0; c < kMemCategories; ++c)
        during.bytes[static_cast<size_t>(c)] = ledger.current(static_cast<MemCategory>(c));
    };
    // Nothing of the run is charged before it starts; the model is built on the GPU (one engine).
    MemoryFigures host;
    for (int c = 0; c < kMemCategories; ++c)
      host.bytes[static_cast<size_t>(c)] = ledger.current(static_cast<MemCategory>(c));
    std::optional<MemoryPlan> planned;
    {
      TrainingSetup s = build_training(job);
      (void)run_device_training(s, cb);
      planned = plan_memory(s.model->layout(), s.job.optimizer, s.job.parallel, /*world=*/1);
    }  // the setup (model, optimizer) released: everything must be back
    const MemoryPlan& plan = *planned;
    for (const MemCategory c :
         {MemCategory::params, MemCategory::grads, MemCategory::optimizer_state}) {
      const int64_t device_bytes = during[c] - host[c];
      o.push_back(bounded("memory", fmt::format("{} during training", to_string(c)),
                          "bytes off the plan",
                          std::fabs(static_cast<double>(device_bytes - plan.steady[c])), 0,
                          fmt::format("ledger {} B, planner {} B ({})", device_bytes,
                                      plan.steady[c], plan.formula)));
    }
    const int64_t acts = during[MemCategory::activations] - host[MemCategory::activations];
    o.push_back(bounded("memory", "activations charged during training", "bytes missing",
                        acts > 0 ? 0.0 : 1.0, 0, fmt::format("ledger {} B", acts)));
    double left = 0;
    for (int c = 0; c < kMemCategories; ++c)
      left += std::fabs(static_cast<double>(ledger.current(static_cast<MemCategory>(c)) -
                                            host.bytes[static_cast<size_t>(c)]));
    o.push_back(bounded("memory", "released after training", "bytes still charged", left, 0,
                        "every device buffer returned to the ledger"));
  });
  return out;
}

}  // namespace shardlab::doctor
