// shardlab bench: performance figures measured on this machine.
//   optimizer  base-optimizer update throughput next to a STREAM-style triad (engine/bench);
//              with --device cuda, the kernels/cuda update kernels next to a device copy
//   mlp        single-process MLP training throughput on Fashion-MNIST, in samples/s
//   model      the example jobs (fashion_mlp, chars_gpt) on the CPU and on a GPU, samples/s and
//              tokens/s and the GPU/CPU ratio (engine/bench/model_bench.h); --pytorch-shapes: at
//              the shapes of the single-process PyTorch comparison (tests/bench/pytorch_shapes.py),
//              on the CPU
//   comm, sharded, hybrid, telemetry: bench_comm.cpp, bench_sharded.cpp, bench_hybrid.cpp,
//   bench_telemetry.cpp, web: bench_web.cpp
#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <iostream>

#include "engine/bench/model_bench.h"
#include "engine/bench/optimizer_bench.h"
#include "engine/cli/args.h"
#include "engine/cli/bench_common.h"
#include "engine/cli/command_spec.h"
#include "engine/cli/commands.h"
#include "engine/cli/json_output.h"
#include "engine/core/device.h"
#include "engine/job/build.h"

#if SHARDLAB_HAVE_CUDA_KERNELS
#include "engine/bench/optimizer_bench_cuda.h"
#endif

namespace shardlab::cli {
namespace {

// `bench optimizer --json`: a row per optimizer with its rates, each measured against the
// device's yardstick (the triad on the CPU, a device copy on CUDA): the yardstick's bandwidth
// (`yardstick`_gb_per_second, from the row's member `yardstick_gb_per_s`) and the optimizer's
// share of it (`yardstick`_ratio, from `ratio`).
template <class Row>
void print_optimizer_json(const std::string& device, int64_t n, int reps,
                          const std::vector<Row>& rows, const std::string& yardstick,
                          double Row::*yardstick_gb_per_s, double Row::*ratio) {
  Json out{{"bench", "optimizer"}, {"device", device}, {"parameters", n}, {"reps", reps}};
  out["rows"] = Json::array();
  for (const Row& r : rows)
    out["rows"].push_back(Json{{"optimizer", r.optimizer},
                               {"setting", r.setting},
                               {"parameters", r.n},
                               {"bytes_per_param", r.bytes_per_param},
                               {"best_seconds", r.best_seconds},
                               {"median_seconds", r.median_seconds},
                               {"params_per_second", r.params_per_s},
                               {"gb_per_second", r.gb_per_s},
                               {yardstick + "_gb_per_second", r.*yardstick_gb_per_s},
                               {yardstick + "_ratio", r.*ratio}});
  print_json(out);
}

// `bench optimizer --device cuda`: the GPU's fused update kernels against its copy bandwidth.
// Without the CUDA kernels in this build, or without a usable GPU, one line and exit status 1.
int bench_optimizer_cuda(const Args& args, const std::vector<std::string>& optimizers) {
  // Defaults of OptimizerBenchCudaOptions; the flags are checked even where the bench cannot run.
  const int64_t n = args.get_int("--params", int64_t{64} << 20, 1024, int64_t{1} << 31);
  const int reps = static_cast<int>(args.get_int("--reps", 20, 1, 1000));
#if SHARDLAB_HAVE_CUDA_KERNELS
  std::string why;
  if (usable_gpus(&why) == 0)
    SL_THROW(Error, "bench optimizer --device cuda: no usable GPU: {}", why);
  OptimizerBenchCudaOptions opt;
  opt.n = n;
  opt.reps = reps;
  opt.optimizers = optimizers;
  StdoutToStderr text_to_stderr(args.has("--json"));
  const auto rows = run_optimizer_bench_cuda(opt, std::cout);
  if (!args.has("--json")) return 0;
  text_to_stderr.restore();
  print_optimizer_json("cuda", n, reps, rows, "copy", &OptimizerBenchCudaRow::copy_gb_per_s,
                       &OptimizerBenchCudaRow::copy_ratio);
  return 0;
#else
  (void)n;
  (void)reps;
  (void)optimizers;
  SL_THROW(Error,
           "bench optimizer --device cuda: this shardlab was built without the CUDA kernels "
           "(it needs a CUDA toolkit with nvcc at configure time)");
#endif
}

int bench_optimizer(const std::vector<std::string>& argv) {
  Args args(argv, arg_spec("bench optimizer"));
  args.expect_no_positional();
  const std::vector<std::string> optimizers = split_list(args.get("--optimizers"));
  for (const auto& name : optimizers) {
    const auto& known = optimizer_names();
    if (std::find(known.begin(), known.end(), name) == known.end())
      SL_THROW(UsageError, "--optimizers: unknown optimizer '{}' (known: {})", name,
               fmt::join(known, ", "));
  }
  const std::string device = args.get("--device", "cpu");
  if (device == "cuda") return bench_optimizer_cuda(args, optimizers);
  if (device != "cpu")
    SL_THROW(UsageError, "--device: unknown device '{}' (known: cpu, cuda)", device);
  OptimizerBenchOptions opt;
  opt.n = args.get_int("--params", opt.n, 1024, int64_t{1} << 31);
  opt.reps = static_cast<int>(args.get_int("--reps", opt.reps, 1, 1000));
  opt.optimizers = optimizers;
  StdoutToStderr text_to_stderr(args.has("--json"));
  const std::vector<OptimizerBenchRow> rows = run_optimizer_bench(opt, std::cout);
  if (!args.has("--json")) return 0;
  text_to_stderr.restore();
  print_optimizer_json("cpu", opt.n, opt.reps, rows, "triad", &OptimizerBenchRow::triad_gb_per_s,
                       &OptimizerBenchRow::triad_ratio);
  return 0;
}

int bench_mlp(const std::vector<std::string>& argv) {
  Args args(argv, arg_spec("bench mlp"));
  args.expect_no_positional();
  JobSpec job;
  job.name = "bench-mlp";
  job.model.kind = "mlp";
  job.data.dataset = "fashion-mnist";
  job.data.path = args.get("--data", job.data.path);
  job.train.steps = args.get_int("--steps", 500, 10, 1000000);
  job.train.batch_size = args.get_int("--batch", 64, 1, 60000);
  job.train.log_every = job.train.steps;
  StdoutToStderr text_to_stderr(args.has("--json"));
  TrainingSetup s = build_training(job);
  // Time training alone: no evaluation set.
  Trainer trainer(*s.model, *s.optimizer, *s.data.train, nullptr, s.job.train, job.optimizer.lr);
  const TrainResult r = trainer.run();
  const double seconds_per_step = r.train_seconds / static_cast<double>(r.steps);
  if (args.has("--json")) {
    text_to_stderr.restore();
    print_json(Json{{"bench", "mlp"},
                    {"parameters", s.model->num_params()},
                    {"batch_size", job.train.batch_size},
                    {"steps", r.steps},
                    {"samples_per_second", r.samples_per_second},
                    {"seconds_per_step", seconds_per_step}});
    return 0;
  }
  fmt::print("mlp {}-{}-{}-{}, {} parameters, adam, batch {}, {} steps, 1 BLAS thread\n",
             s.job.model.mlp.input_dim, s.job.model.mlp.hidden[0], s.job.model.mlp.hidden[1],
             s.job.model.mlp.num_classes, s.model->num_params(), job.train.batch_size, r.steps);
  fmt::print("training throughput: {:.0f} samples/s ({:.2f} ms per step)\n", r.samples_per_second,
             1e3 * seconds_per_step);
  return 0;
}

// `bench model [--device cpu|cuda|both] [--steps N] [--pytorch-shapes | --gpu-shapes] [--data
// DIR]`.
// --gpu-shapes runs on cuda unless --device says otherwise. --device cuda where no
// GPU can be used is one line and exit status 1 (before anything is read); both measures the CPU
// and says why cuda was not measured. --pytorch-shapes: the shapes of
// tests/bench/pytorch_shapes.py's single-process PyTorch comparison
// (ModelBenchOptions::pytorch_shapes), on the CPU unless --device says otherwise, 100 timed steps
// after 5 warm-up steps unless --steps says otherwise.
int bench_model(const std::vector<std::string>& argv) {
  Args args(argv, arg_spec("bench model"));
  args.expect_no_positional();
  ModelBenchOptions opt;
  opt.pytorch_shapes = args.has("--pytorch-shapes");
  if (opt.pytorch_shapes) {
    opt.device = "cpu";
    opt.steps = 100;
    opt.warmup = 5;
  }
  opt.gpu_shapes = args.has("--gpu-shapes");
  if (opt.gpu_shapes && opt.pytorch_shapes)
    SL_THROW(UsageError, "--gpu-shapes and --pytorch-shapes cannot be combined");
  if (opt.gpu_shapes) opt.device = "cuda";
  opt.data_dir = args.get("--data", "");
  opt.device = args.get("--device", opt.device);
  if (opt.device != "cpu" && opt.device != "cuda" && opt.device != "both")
    SL_THROW(UsageError, "--device: unknown device '{}' (known: cpu, cuda, both)", opt.device);
  opt.steps = args.get_int("--steps", opt.steps, 1, 100000);
  if (opt.device == "cuda") {
    const std::string problem = device_problem("cuda");
    SL_ENFORCE_T(Error, problem.empty(), "bench model --device cuda: {}", problem);
  }
  StdoutToStderr text_to_stderr(args.has("--json"));
  const ModelBenchResult result = run_model_bench(opt, std::cout);
  if (!args.has("--json")) return 0;
  text_to_stderr.restore();
  Json out{{"bench", "model"}, {"rows", Json::array()}};
  for (const ModelBenchRow& r : result.rows)
    out["rows"].push_back(Json{{"job", r.job},
                               {"device", r.device},
                               {"unit", r.unit},
                               {"steps", r.steps},
                               {"seconds", r.seconds},
                               {"units_per_second", r.per_second}});
  out["cuda_not_measured"] = result.cuda_not_measured;
  print_json(out);
  return 0;
}

}  // namespace

int bench_command(const std::vector<std::string>& argv) {
  if (argv.empty())
    SL_THROW(
        UsageError,
        "bench needs a target: optimizer, mlp, model, comm, sharded, hybrid, telemetry or web");
  const std::vector<std::string> rest(argv.begin() + 1, argv.end());
  if (argv[0] == "optimizer") return bench_optimizer(rest);
  if (argv[0] == "mlp") return bench_mlp(rest);
  if (argv[0] == "model") return bench_model(rest);
  if (argv[0] == "comm") return bench_comm_command(rest);
  if (argv[0] == "sharded") return bench_sharded_command(rest);
  if (argv[0] == "hybrid") return bench_hybrid_command(rest);
  if (argv[0] == "telemetry") return bench_telemetry_command(rest);
  if (argv[0] == "web") return bench_web_command(rest);
  SL_THROW(UsageError,
           "unknown bench target '{}' (known: optimizer, mlp, model, comm, sharded, hybrid, "
           "telemetry, web)",
           argv[0]);
}

}  // namespace shardlab::cli
