#include "engine/cli/sharded_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/checkpoint/checkpoint_store.h"
#include "engine/core/error.h"
#include "engine/core/human_format.h"
#include "engine/hybrid/pipeline_schedule.h"

namespace shardlab::cli {

namespace {

std::string model_line(const ModelConfig& m) {
  if (m.kind == "mlp")
    return fmt::format("mlp {}-{}-{} ({})", m.mlp.input_dim, fmt::join(m.mlp.hidden, "-"),
                       m.mlp.num_classes, m.mlp.activation);
  return fmt::format("gpt {} layers, width {}, {} heads, context {}, vocab {}", m.gpt.layers,
                     m.gpt.width, m.gpt.heads, m.gpt.context, m.gpt.vocab_size);
}

// Bytes in the unit that keeps 3-4 significant digits.
std::string human(int64_t b) {
  return human_bytes(b, {.step_up = 10, .gib_decimals = 2});
}

}  // namespace

TrainerCallbacks progress_printer(bool tokens, bool quiet) {
  TrainerCallbacks cb;
  if (quiet) return cb;
  cb.on_log = [tokens](const StepInfo& s) {
    fmt::print(
        "step {:>6}/{}  epoch {:>3}  loss {:.4f}  lr {:.3e}  grad-norm {:.3f}  {:.0f} {}/s\n",
        s.step, s.total_steps, s.epoch, s.loss, s.lr, s.grad_norm,
        tokens ? s.tokens_per_second : s.samples_per_second, tokens ? "tokens" : "samples");
    std::fflush(stdout);
  };
  cb.on_eval = [](const EvalResult& e) {
    fmt::print("eval  step {:>6}  loss {:.4f}  accuracy {:.2f}%  ({} samples)\n", e.step, e.loss,
               100.0 * e.accuracy, e.samples);
    std::fflush(stdout);
  };
  return cb;
}

void print_job_header(const JobSpec& job, const std::string& data_description, int64_t params) {
  fmt::print("job {}: {}, {} parameters\n", job.name, model_line(job.model), params);
  fmt::print("data: {}\n", data_description);
  fmt::print("optimizer: {} lr {:g}, schedule {}, batch {}", job.optimizer.name, job.optimizer.lr,
             job.train.schedule.kind, job.train.batch_size);
  if (job.train.accumulation_steps > 1)
    fmt::print(" in {} micro-steps", job.train.accumulation_steps);
  if (job.train.clip_grad_norm > 0) fmt::print(", clip grad-norm {:g}", job.train.clip_grad_norm);
  fmt::print("\n");
  const ParallelConfig& p = job.parallel;
  if (p.strategy != "none" && uses_model_parallelism(p)) {
    const int64_t dp = p.dp > 0 ? p.dp : p.world_size / (p.pp * p.tp);
    fmt::print("parallel: pp {} x tp {} x dp {} on {} ranks ({}), {} over dp, {} micro-batches",
               p.pp, p.tp, dp, p.world_size, p.backend, p.strategy, p.micro_batches);
    if (p.pp > 1) fmt::print(", schedule {}, {} stages", p.schedule, p.pp_partition);
    fmt::print(", buckets {:g} MiB\n", p.bucket_mb);
  } else if (p.strategy != "none") {
    fmt::print("parallel: {} on {} ranks ({}), overlap {}", p.strategy, p.world_size, p.backend,
               p.overlap ? "on" : "off");
    if (p.strategy != "fsdp") fmt::print(", buckets {:g} MiB", p.bucket_mb);
    if (p.fsdp_keep_params) fmt::print(", params kept from forward to backward");
    fmt::print("\n");
  }
  std::fflush(stdout);
}

void print_summary_line(const JobSpec& job, const TrainResult& r, double total_seconds) {
  const bool tokens = job.model.kind == "gpt";
  std::string eval;
  if (!r.evals.empty())
    eval = fmt::format(" | eval accuracy {:.2f}%  eval loss {:.4f}",
                       100.0 * r.final_eval().accuracy, r.final_eval().loss);
  fmt::print(
      "summary: {}{} | {} steps, train {:.1f} s, eval {:.1f} s, total {:.1f} s | {:.0f} "
      "{}/s\n",
      r.stop_reason, eval, r.steps, r.train_seconds, r.eval_seconds, total_seconds,
      tokens ? r.tokens_per_second : r.samples_per_second, tokens ? "tokens" : "samples");
}

namespace {

// Per stage: the measured bubble (idle / (busy + idle), averaged over the stage's ranks) beside
// the formula (p-1)/(m+p-1).
void print_bubble(const JobSpec& job, const ParallelRunResult& run) {
  const int p = static_cast<int>(job.parallel.pp);
  const int m = static_cast<int>(job.parallel.micro_batches);
  std::vector<double> busy(static_cast<size_t>(p), 0.0), idle(static_cast<size_t>(p), 0.0);
  for (const RankReport& rr : run.ranks) {
    if (rr.stage < 0 || rr.stage >= p) continue;
    busy[static_cast<size_t>(rr.stage)] += rr.pipeline_busy;
    idle[static_cast<size_t>(rr.stage)] += rr.pipeline_idle;
  }
  std::string stages;
  for (int s = 0; s < p; ++s) {
    const double b = busy[static_cast<size_t>(s)], i = idle[static_cast<size_t>(s)];
    stages += fmt::format("{}{:.1f}%", s == 0 ? "" : " ", b + i > 0 ? 100.0 * i / (b + i) : 0.0);
  }
  const int v = static_cast<int>(job.parallel.pp_chunks);
  if (v > 1)
    fmt::print(
        "pipeline bubble ({}, p={}, v={}, m={}): measured per stage {}; formula (p-1)/(v*m+p-1) = "
        "{:.1f}%\n",
        job.parallel.schedule, p, v, m, stages,
        100.0 * interleaved_bubble_fraction_formula(p, m, v));
  else
    fmt::print(
        "pipeline bubble ({}, p={}, m={}): measured per stage {}; formula (p-1)/(m+p-1) = "
        "{:.1f}%\n",
        job.parallel.schedule, p, m, stages, 100.0 * bubble_fraction_formula(p, m));
}

}  // namespace

void print_sharded_summary(const JobSpec& job, const ParallelRunResult& run, double total_seconds) {
  print_summary_line(job, run.result, total_seconds);
  if (run.ranks.empty()) return;
  const MemoryPlan& plan = run.ranks.front().plan;
  fmt::print("memory per rank, steady state after the last step: measured (planned)  [{}]\n",
             plan.formula);
  fmt::print("{:>5}  {:>22}  {:>22}  {:>22}  {:>11}  {:>9}  {:>11}  {:>9}\n", "rank", "params",
             "grads", "optimizer_state", "activations", "comm", "peak total", "comm time");
  bool all_match = true;
  for (const RankReport& rr : run.ranks) {
    auto cell = [&](MemCategory c) {
      const int64_t m = rr.memory.current[c], p = rr.plan.steady[c];
      if (m != p) all_match = false;
      return fmt::format("{} ({})", human(m), human(p));
    };
    fmt::print(
        "{:>5}  {:>22}  {:>22}  {:>22}  {:>11}  {:>9}  {:>11}  {:>8.2f}s\n", rr.rank,
        cell(MemCategory::params), cell(MemCategory::grads), cell(MemCategory::optimizer_state),
        human(rr.memory.current[MemCategory::activations]),
        human(rr.memory.current[MemCategory::comm]), human(rr.memory.peak_total), rr.comm_seconds);
  }
  fmt::print("ledger {} the planner on every rank (params, grads, optimizer state)\n",
             all_match ? "matches" : "DIFFERS FROM");
  if (job.parallel.pp > 1) print_bubble(job, run);
  std::fflush(stdout);
}

std::function<void(const std::string&, int64_t)> checkpoint_printer(bool quiet) {
  if (quiet) return {};
  return [](const std::string& dir, int64_t step) {
    fmt::print("checkpoint: step {} saved to {}\n", step, dir);
    std::fflush(stdout);
  };
}

std::string check_resume(const JobSpec& job, const std::string& dir, bool verify_shards) {
  SL_ENFORCE(job.parallel.strategy != "none",
             "--resume: checkpoints hold the ranks' sharded state, but this job's "
             "parallel.strategy is none (resume with the strategy the checkpoint was written by)");
  const std::string step_dir = find_checkpoint(dir);
  const CheckpointManifest m = read_manifest(step_dir);
  if (verify_shards) verify(step_dir);
  const ParallelConfig& p = job.parallel;
  const bool hybrid = uses_model_parallelism(p);
  const int pp = hybrid ? static_cast<int>(p.pp) : 1, tp = hybrid ? static_cast<int>(p.tp) : 1;
  const int dp = hybrid ? static_cast<int>(p.dp) : static_cast<int>(p.world_size);
  const bool same = m.strategy == p.strategy && m.world_size == p.world_size && m.pp == pp &&
                    m.tp == tp && m.dp == dp;
  std::string line = fmt::format("resume: step {} of {} ({} on {} ranks, {}x{}x{})", m.step,
                                 step_dir, m.strategy, m.world_size, m.pp, m.tp, m.dp);
  if (!same)
    line += fmt::format(", resharded to {} on {} ranks ({}x{}x{})", p.strategy, p.world_size, pp,
                        tp, dp);
  return line;
}

}  // namespace shardlab::cli
