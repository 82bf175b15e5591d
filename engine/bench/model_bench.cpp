#include "engine/bench/model_bench.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <nlohmann/json.hpp>

#include <ostream>

#include "engine/core/device.h"
#include "engine/core/error.h"
#include "engine/core/paths.h"
#include "engine/run/device_training.h"
#include "engine/job/build.h"
#include "engine/job/job_spec.h"
#include "kernels/cpu/gemm.h"

namespace shardlab {

namespace {

struct BenchJob {
  const char* name;  // file stem under the jobs folder
  const char* unit;  // what the rate counts
};
constexpr BenchJob kJobs[] = {{"fashion_mlp", "samples"}, {"chars_gpt", "tokens"}};

// The shapes of the PyTorch 1.13 script tests/bench/pytorch_shapes.py, per job (set explicitly, so
// an edit of the job files cannot move them): the optimizers are the job files' (adam for
// fashion_mlp, adamw for chars_gpt), as in that script.
std::vector<std::string> pytorch_shape_overrides(const std::string& job) {
  if (job == "fashion_mlp")
    return {
        "model.mlp.hidden=[512, 256]",
        "model.mlp.activation=\"relu\"",
        "optimizer.name=\"adam\"",
        "train.batch_size=256",
    };
  return {
      "model.gpt.context=64", "model.gpt.width=64",    "model.gpt.layers=2",
      "model.gpt.heads=4",    "model.gpt.mlp_ratio=4", "train.batch_size=32",
  };
}

// The GPU-sized shapes of the PyTorch comparison on one GPU (tests/bench/pytorch_gpu.py).
std::vector<std::string> gpu_shape_overrides(const std::string& job) {
  if (job == "fashion_mlp")
    return {
        "model.mlp.hidden=[2048, 2048]",
        "model.mlp.activation=\"relu\"",
        "optimizer.name=\"adam\"",
        "train.batch_size=2048",
    };
  return {
      "model.gpt.context=256", "model.gpt.width=512",   "model.gpt.layers=8",
      "model.gpt.heads=8",     "model.gpt.mlp_ratio=4", "train.batch_size=32",
  };
}

// The job file as one process on `device`, warmup + steps steps, no evaluation or progress.
JobSpec bench_job(const std::string& path, const std::string& job, const std::string& device,
                  int64_t total_steps, const ModelBenchOptions& o) {
  std::vector<std::string> overrides{"device=" + device,
                                     "parallel={}",
                                     fmt::format("train.steps={}", total_steps),
                                     "train.epochs=0",
                                     fmt::format("train.log_every={}", total_steps),
                                     "train.eval_every=0",
                                     "train.eval_batches=0",
                                     "train.schedule={}",
                                     "train.early_stopping={}"};
  if (o.pytorch_shapes)
    for (std::string& v : pytorch_shape_overrides(job)) overrides.push_back(std::move(v));
  if (o.gpu_shapes)
    for (std::string& v : gpu_shape_overrides(job)) overrides.push_back(std::move(v));
  if (!o.data_dir.empty() && job == "fashion_mlp")
    overrides.push_back("data.path=" + nlohmann::json(o.data_dir).dump());
  return load_job(path, overrides);
}

std::string model_description(const TrainingSetup& s) {
  const ModelConfig& m = s.job.model;
  if (m.kind == "gpt")
    return fmt::format(
        "gpt context {}, width {}, {} layers, {} heads, {} parameters, {}, batch {} x {} tokens",
        m.gpt.context, m.gpt.width, m.gpt.layers, m.gpt.heads, s.model->num_params(),
        s.job.optimizer.name, s.job.train.batch_size, m.gpt.context);
  std::string dims = std::to_string(m.mlp.input_dim);
  for (const int64_t h : m.mlp.hidden) dims += fmt::format("-{}", h);
  dims += fmt::format("-{}", m.mlp.num_classes);
  return fmt::format("mlp {}, {} parameters, {}, batch {}", dims, s.model->num_params(),
                     s.job.optimizer.name, s.job.train.batch_size);
}

// Trains `setup` and measures the steps after the warm-up.
ModelBenchRow measure(TrainingSetup& setup, const BenchJob& job, int64_t warmup) {
  ModelBenchRow row;
  row.job = job.name;
  row.device = setup.job.device;
  row.unit = job.unit;
  const bool tokens = row.unit == "tokens";
  double units = 0;
  TrainerCallbacks cb;
  cb.on_step = [&](const StepInfo& s) {
    if (s.step <= warmup) return;
    ++row.steps;
    row.seconds += s.step_seconds;
    units += (tokens ? s.tokens_per_second : s.samples_per_second) * s.step_seconds;
  };
  // Training alone is timed: no evaluation set.
  setup.data.eval.reset();
  if (row.device == "cuda") {
    (void)run_device_training(setup, cb);
  } else {
    Trainer trainer(*setup.model, *setup.optimizer, *setup.data.train, nullptr, setup.job.train,
                    setup.job.optimizer.lr);
    (void)trainer.run(cb);
  }
  row.per_second = row.seconds > 0 ? units / row.seconds : 0.0;
  return row;
}

}  // namespace

ModelBenchResult run_model_bench(const ModelBenchOptions& o, std::ostream& out) {
  SL_ENFORCE(o.device == "cpu" || o.device == "cuda" || o.device == "both",
             "--device: unknown device '{}' (known: cpu, cuda, both)", o.device);
  SL_ENFORCE(o.steps >= 1, "--steps: must be >= 1, got {}", o.steps);
  SL_ENFORCE(!(o.pytorch_shapes && o.gpu_shapes),
             "bench model: --pytorch-shapes and --gpu-shapes cannot be combined");
  SL_ENFORCE(o.warmup >= 0, "bench model: warm-up steps must be >= 0, got {}", o.warmup);
  ModelBenchResult result;
  const std::string cuda_problem = o.device == "cpu" ? std::string() : device_problem("cuda");
  if (o.device == "cuda") SL_ENFORCE(cuda_problem.empty(), "device: {}", cuda_problem);
  const bool cpu = o.device != "cuda";
  const bool cuda = o.device != "cpu" && cuda_problem.empty();
  if (o.device == "both" && !cuda_problem.empty()) result.cuda_not_measured = cuda_problem;
  const std::string dir = o.jobs_dir.empty() ? resource_dir() + "/jobs" : o.jobs_dir;
  const int64_t total = o.warmup + o.steps;
  fmt::print(out,
             "bench model: {} timed steps after {} warm-up steps, one process, no evaluation{}\n",
             o.steps, o.warmup,
             o.pytorch_shapes
                 ? ", the shapes of the PyTorch 1.13 comparison (tests/bench/pytorch_shapes.py)"
             : o.gpu_shapes ? ", GPU-sized shapes"
                            : "");
  if (o.pytorch_shapes) {
    // The comparison is one process on one core: one BLAS thread, whatever this process had.
    kernels::use_single_blas_thread();
    fmt::print(out, "blas: {}; kernels for {}; {} thread\n", kernels::blas_config(),
               kernels::blas_core_name(), kernels::blas_threads());
  }
  out.flush();
  for (const BenchJob& job : kJobs) {
    const std::string path = fmt::format("{}/{}.json", dir, job.name);
    std::string line;
    const ModelBenchRow* cpu_row = nullptr;
    const ModelBenchRow* cuda_row = nullptr;
    std::vector<ModelBenchRow> rows;
    rows.reserve(2);
    for (const char* device : {"cpu", "cuda"}) {
      if ((device == std::string("cpu") && !cpu) || (device == std::string("cuda") && !cuda))
        continue;
      TrainingSetup setup = build_training(bench_job(path, job.name, device, total, o));
      if (line.empty()) line = fmt::format("{} ({}):", job.name, model_description(setup));
      rows.push_back(measure(setup, job, o.warmup));
    }
    for (const ModelBenchRow& r : rows) {
      (r.device == "cpu" ? cpu_row : cuda_row) = &r;
      line += fmt::format(" {} {:.0f} {}/s", r.device, r.per_second, r.unit);
    }
    if (cpu_row && cuda_row && cpu_row->per_second > 0)
      line += fmt::format(" | cuda/cpu {:.2f}x", cuda_row->per_second / cpu_row->per_second);
    fmt::print(out, "{}\n", line);
    out.flush();
    for (ModelBenchRow& r : rows) result.rows.push_back(std::move(r));
  }
  if (!result.cuda_not_measured.empty())
    fmt::print(out, "cuda: not measured: {}\n", result.cuda_not_measured);
  return result;
}

}  // namespace shardlab
