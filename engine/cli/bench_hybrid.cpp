// shardlab bench hybrid: 3D parallelism (pipeline x tensor x data) of the GPT character model,
// ranks as threads of this process.
//   throughput  layouts pp x tp x dp = 1x1x1, 1x2x1, 2x1x1, 2x2x2 at the global batch (32):
//               median step time and tokens/s; m = 4 micro-batches where pp > 1, else 1
//   bubble      pp = 2, 4 (tp = dp = 1) x m = 1, 4, 8 x 1f1b, gpipe, and interleaved with v = 2
//               chunks (m a multiple of p) at a fixed global batch (16, so only m changes): every
//               stage's measured bubble beside (p-1)/(m+p-1) ((p-1)/(v*m+p-1) interleaved). The
//               model has 6 layers here (--bubble-layers): 8 pipeline blocks with the embedding and
//               the head, so that at p = 4 every stage runs two blocks and the stages cost about
//               the same (with 2 layers, p = 4 would give the embedding alone a stage, idle ~100%).
// The model, data and optimizer are resources/jobs/chars_gpt.json's (context 64, width 64, 2
// layers, 4 heads; adamw lr 0.003).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <iostream>
#include <set>

#include "engine/bench/harness.h"
#include "engine/bench/hybrid_bench.h"
#include "engine/cli/args.h"
#include "engine/cli/command_spec.h"
#include "engine/cli/commands.h"
#include "engine/cli/json_output.h"
#include "engine/job/build.h"
#include "engine/hybrid/pipeline_schedule.h"
#include "engine/plan/memory/planner.h"

namespace shardlab::cli {
namespace {

// resources/jobs/chars_gpt.json's model, data and optimizer (spelled out so that the command
// does not depend on the working directory).
JobSpec chars_gpt_job(const std::string& strategy) {
  JobSpec job;
  job.name = "bench-hybrid";
  job.model.kind = "gpt";
  job.model.seed = 1;
  job.model.gpt.context = 64;
  job.model.gpt.width = 64;
  job.model.gpt.layers = 2;
  job.model.gpt.heads = 4;
  job.model.gpt.mlp_ratio = 4;
  job.data.dataset = "chars";
  job.data.eval_fraction = 0.1;
  job.optimizer.name = "adamw";
  job.optimizer.lr = 0.003;
  job.optimizer.weight_decay = 0.1;
  job.train.batch_size = 32;
  job.train.log_every = 1;
  job.train.eval_every = 0;
  job.parallel.strategy = strategy;
  job.parallel.backend = "threads";
  return job;
}

// --json: one configuration's figures (fields: command_table.cpp).
Json result_json(const HybridBenchResult& r, bool bubble) {
  const HybridBenchConfig& c = r.config;
  Json out{{"layout", c.layout()},
           {"pp", c.pp},
           {"tp", c.tp},
           {"dp", c.dp},
           {"micro_batches", c.micro_batches},
           {"schedule", c.schedule},
           {"chunks", c.chunks},
           {"batch_size", c.batch_size},
           {"context", r.context},
           {"steps", r.steps},
           {"median_step_ms", r.median_step_ms},
           {"min_step_ms", r.min_step_ms},
           {"tokens_per_second", r.tokens_per_s},
           {"peak_bytes_max", r.peak_bytes_max},
           {"final_loss", r.final_loss}};
  if (bubble) {
    Json stages = Json::array();
    for (size_t s = 0; s < r.stage_busy_s.size(); ++s) stages.push_back(r.stage_bubble(s));
    out["stage_bubble"] = stages;
    out["mean_bubble"] = r.mean_bubble();
    out["formula_bubble"] = interleaved_bubble_fraction_formula(
        static_cast<int>(c.pp), static_cast<int>(c.micro_batches), static_cast<int>(c.chunks));
  }
  return out;
}

}  // namespace

int bench_hybrid_command(const std::vector<std::string>& argv) {
  const Args args(argv, arg_spec("bench hybrid"));
  args.expect_no_positional();
  const bool quick = args.has("--quick");
  const int64_t steps = args.get_int("--steps", quick ? 2 : 10, 1, 100000);
  const int64_t warmup = args.get_int("--warmup", quick ? 1 : 2, 0, 100000);
  const std::string strategy = args.get("--strategy", "ddp");
  if (strategy != "ddp" && strategy != "zero1" && strategy != "zero2")
    SL_THROW(UsageError, "--strategy: unknown strategy '{}' (known: ddp, zero1, zero2)", strategy);
  const auto timeout = std::chrono::seconds(args.get_int("--timeout-s", 120, 1, 86400));
  // At least 2 layers: 4 blocks for p = 4.
  const int64_t bubble_layers = args.get_int("--bubble-layers", 6, 2, 64);
  const bool json = args.has("--json");
  StdoutToStderr text_to_stderr(json);

  JobSpec job = chars_gpt_job(strategy);
  const Datasets data = load_completed_data(job);
  const int64_t throughput_batch = job.train.batch_size;
  const int64_t bubble_batch = args.get_int("--bubble-batch", 16, 1, 4096);
  if (bubble_batch % 8 != 0)
    SL_THROW(UsageError, "--bubble-batch: must be a multiple of 8 (the largest m), got {}",
             bubble_batch);
  JobSpec bubble_job = job;
  bubble_job.model.gpt.layers = bubble_layers;

  std::vector<HybridBenchConfig> layouts;
  for (auto [pp, tp, dp] : {std::array<int64_t, 3>{1, 1, 1}, {1, 2, 1}, {2, 1, 1}, {2, 2, 2}}) {
    HybridBenchConfig c;
    c.pp = pp;
    c.tp = tp;
    c.dp = dp;
    c.micro_batches = pp > 1 ? 4 : 1;
    c.schedule = "1f1b";
    c.batch_size = throughput_batch;
    layouts.push_back(c);
  }
  std::vector<HybridBenchConfig> pipelines;
  const std::vector<int64_t> ms =
      quick ? std::vector<int64_t>{1, 4} : std::vector<int64_t>{1, 4, 8};
  for (const char* schedule : {"1f1b", "gpipe"})
    for (int64_t p : {2, 4})
      for (int64_t m : ms) {
        HybridBenchConfig c;
        c.pp = p;
        c.micro_batches = m;
        c.schedule = schedule;
        c.batch_size = bubble_batch;
        pipelines.push_back(c);
      }
  // Interleaved 1F1B with v = 2 chunks a stage (m a multiple of p).
  for (int64_t p : {2, 4})
    for (int64_t m : ms)
      if (m % p == 0) {
        HybridBenchConfig c;
        c.pp = p;
        c.micro_batches = m;
        c.schedule = "interleaved";
        c.chunks = 2;
        c.batch_size = bubble_batch;
        pipelines.push_back(c);
      }

  const GptConfig& g = job.model.gpt;
  const int cores = bench::usable_cores();
  fmt::print(
      "bench hybrid: gpt vocab {} context {} width {} layers {} heads {} ({} parameters), {} lr "
      "{:g}, dp strategy {}\n",
      g.vocab_size, g.context, g.width, g.layers, g.heads, model_layout(job.model).size(),
      job.optimizer.name, job.optimizer.lr, strategy);
  fmt::print("data: {}\n", data.description);
  fmt::print(
      "threads backend on {} cores (layouts with more ranks are oversubscribed), 1 BLAS thread "
      "per rank; {} warm-up + {} timed steps per configuration{}\n",
      cores, warmup, steps, quick ? " (--quick)" : "");
  std::fflush(stdout);

  fmt::print("\nthroughput: global batch {} x context {} tokens\n", throughput_batch, g.context);
  std::fflush(stdout);
  const auto rows = bench_hybrid_threads(*data.train, job, layouts, warmup, steps, timeout);
  print_hybrid_throughput(rows, std::cout);

  fmt::print(
      "\npipeline bubble: tp = dp = 1, global batch {}, {} layers ({} parameters): {} blocks over "
      "p stages\n",
      bubble_batch, bubble_layers, model_layout(bubble_job.model).size(), bubble_layers + 2);
  std::fflush(stdout);
  const auto bubbles =
      bench_hybrid_threads(*data.train, bubble_job, pipelines, warmup, steps, timeout);
  print_hybrid_bubble(bubbles, std::cout);
  if (cores < 4)
    fmt::print(
        "note: p = 4 runs 4 stage threads on {} cores, so a stage's busy time includes waiting "
        "for a core\n",
        cores);
  if (json) {
    text_to_stderr.restore();
    Json out{{"bench", "hybrid"}, {"strategy", strategy},        {"warmup", warmup},
             {"steps", steps},    {"throughput", Json::array()}, {"bubble", Json::array()}};
    for (const HybridBenchResult& r : rows) out["throughput"].push_back(result_json(r, false));
    for (const HybridBenchResult& r : bubbles) out["bubble"].push_back(result_json(r, true));
    print_json(out);
  }
  return 0;
}

}  // namespace shardlab::cli
