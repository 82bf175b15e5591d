#include "engine/doctor/sharing_checks.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint_store.h"
#include "engine/core/error.h"
#include "engine/doctor/gpu_fixtures.h"
#include "engine/doctor/training_checks.h"
#include "engine/job/build.h"
#include "engine/run/rank_runner.h"

namespace shardlab::doctor {
namespace {

constexpr const char* kGroup = "training";

TrainResult run_ranks(JobSpec job, const std::string& device, const std::string& resume = {}) {
  job.device = device;
  const Datasets data = load_completed_data(job);
  RankRunOptions o;
  o.resume_from = resume;
  return run_threads_job(job, data, o).result;
}

// A folder of its own for the checkpoint case, removed when it goes.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           fmt::format("shardlab-doctor-{}-{}", ::getpid(), reinterpret_cast<uintptr_t>(this));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

CheckList shared_device_checks(const std::string& device) {
  CheckList out;
  if (device == "cuda") {
    if (std::string why = gpu_skip_reason(0); !why.empty()) {
      out.push_back(skipped(kGroup, "ranks sharing a GPU", why));
      return out;
    }
  }
  std::unique_ptr<SyntheticImages> images;
  guarded(out, kGroup, "synthetic data set",
          [&](CheckList&) { images = std::make_unique<SyntheticImages>(); });
  if (!images) return out;
  const JobSpec mlp = mlp_check_job(images->dir(), device);
  for (const char* strategy : {"ddp", "zero1", "zero2", "fsdp"}) {
    const std::string name = fmt::format("{} with 4 ranks on {}", strategy, device);
    guarded(out, kGroup, name, [&](CheckList& o) {
      JobSpec job = mlp;
      job.parallel.strategy = strategy;
      job.parallel.world_size = 4;
      judge_against_cpu(o, name, job, [&] { return run_ranks(job, device); });
    });
  }
  const JobSpec gpt = gpt_check_job(device);
  for (const bool tp : {true, false}) {
    const std::string name = fmt::format("gpt {} 2 x dp 2 on {}", tp ? "tp" : "pp", device);
    guarded(out, kGroup, name, [&](CheckList& o) {
      JobSpec job = gpt;
      job.parallel.strategy = "zero1";
      job.parallel.world_size = 4;
      job.parallel.tp = tp ? 2 : 1;
      job.parallel.pp = tp ? 1 : 2;
      job.parallel.dp = 2;
      job.parallel.micro_batches = 2;
      judge_against_cpu(o, name, job, [&] { return run_ranks(job, device); });
    });
  }
  const std::string name = fmt::format("zero2 checkpoint on {} resumed on cpu", device);
  guarded(out, kGroup, name, [&](CheckList& o) {
    TempDir dir;
    JobSpec job = mlp;
    job.parallel.strategy = "zero2";
    job.parallel.world_size = 2;
    job.train.checkpoint_dir = (dir.path / "ckpt").string();
    job.train.checkpoint_every = job.train.steps / 2;
    judge_against_cpu(o, name, job, [&] {
      const TrainResult first = run_ranks(job, device);
      const int64_t half = job.train.checkpoint_every;
      JobSpec resumed = job;
      resumed.train.checkpoint_dir = (dir.path / "resumed").string();
      TrainResult r = run_ranks(resumed, "cpu", step_dir(job.train.checkpoint_dir, half));
      SL_ENFORCE(static_cast<int64_t>(r.losses.size()) == job.train.steps - half,
                 "the resumed run took {} steps, expected {}", r.losses.size(),
                 job.train.steps - half);
      // The resumed run took the second half's steps: the first half's losses and evaluations
      // are the device run's, judged with it.
      std::vector<double> losses(first.losses.begin(), first.losses.begin() + half);
      losses.insert(losses.end(), r.losses.begin(), r.losses.end());
      r.losses = std::move(losses);
      std::vector<EvalResult> evals;
      for (const EvalResult& e : first.evals)
        if (e.step <= half) evals.push_back(e);
      evals.insert(evals.end(), r.evals.begin(), r.evals.end());
      r.evals = std::move(evals);
      return r;
    });
  });
  return out;
}

}  // namespace shardlab::doctor
