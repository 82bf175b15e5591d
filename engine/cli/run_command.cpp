// shardlab run JOB.json: load and validate the job, build data, model and optimizer, train in this
// process, print a progress line per logging interval and a summary.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>

#include "engine/cli/args.h"
#include "engine/cli/commands.h"
#include "engine/core/timer.h"
#include "engine/job/job_spec.h"
#include "engine/train/build.h"

namespace shardlab::cli {
namespace {

std::string model_line(const TrainingSetup& s) {
  const ModelConfig& m = s.job.model;
  if (m.kind == "mlp") {
    return fmt::format("mlp {}-{}-{} ({})", m.mlp.input_dim, fmt::join(m.mlp.hidden, "-"),
                       m.mlp.num_classes, m.mlp.activation);
  }
  return fmt::format("gpt {} layers, width {}, {} heads, context {}, vocab {}", m.gpt.layers,
                     m.gpt.width, m.gpt.heads, m.gpt.context, m.gpt.vocab_size);
}

}  // namespace

int run_command(const std::vector<std::string>& argv) {
  Args args(argv, {{"--set"}, {"--quiet"}});
  if (args.positional().size() != 1)
    SL_THROW(UsageError,
             "run needs exactly one job file, e.g. shardlab run resources/jobs/fashion_mlp.json");
  const bool quiet = args.has("--quiet");

  Stopwatch total;
  const JobSpec job = load_job(args.positional()[0], args.all("--set"));
  TrainingSetup setup = build_training(job);
  const bool tokens = setup.job.model.kind == "gpt";

  fmt::print("job {}: {}, {} parameters\n", setup.job.name, model_line(setup),
             setup.model->num_params());
  fmt::print("data: {}\n", setup.data.description);
  fmt::print("optimizer: {} lr {:g}, schedule {}, batch {}\n", job.optimizer.name, job.optimizer.lr,
             job.train.schedule.kind, job.train.batch_size);
  std::fflush(stdout);

  TrainerCallbacks cb;
  if (!quiet) {
    cb.on_log = [&](const StepInfo& s) {
      fmt::print("step {:>6}/{}  epoch {:>3}  loss {:.4f}  lr {:.3e}  {:.0f} {}/s\n", s.step,
                 s.total_steps, s.epoch, s.loss, s.lr,
                 tokens ? s.tokens_per_second : s.samples_per_second,
                 tokens ? "tokens" : "samples");
      std::fflush(stdout);
    };
    cb.on_eval = [&](const EvalResult& e) {
      fmt::print("eval  step {:>6}  loss {:.4f}  accuracy {:.2f}%  ({} samples)\n", e.step, e.loss,
                 100.0 * e.accuracy, e.samples);
      std::fflush(stdout);
    };
  }
  const TrainResult r = run_training(setup, cb);
  const EvalResult& fe = r.final_eval();
  fmt::print(
      "summary: {} | eval accuracy {:.2f}%  eval loss {:.4f} | {} steps, train {:.1f} s, eval "
      "{:.1f} s, "
      "total {:.1f} s | {:.0f} {}/s\n",
      r.stop_reason, 100.0 * fe.accuracy, fe.loss, r.steps, r.train_seconds, r.eval_seconds,
      total.seconds(), tokens ? r.tokens_per_second : r.samples_per_second,
      tokens ? "tokens" : "samples");
  return 0;
}

}  // namespace shardlab::cli
