#include "engine/bench/hybrid_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <ostream>

#include "engine/bench/harness.h"
#include "engine/comm/threads/world.h"
#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/core/timer.h"
#include "engine/data/sampler.h"
#include "engine/hybrid/hybrid_optimizer.h"
#include "engine/hybrid/pipeline_schedule.h"
#include "engine/sharding/sharded_options_from_job.h"
#include "engine/strategies/strategies.h"  // gather_over_ranks

namespace shardlab {
namespace {

using parallel_detail::gather_over_ranks;

std::string percent(double fraction) {
  return fmt::format("{:.1f}%", 100.0 * fraction);
}

// The job of one configuration on `comm`, validated.
JobSpec config_job(Communicator& comm, const JobSpec& base, const HybridBenchConfig& c,
                   int64_t warmup, int64_t steps) {
  SL_ENFORCE(comm.size() == c.ranks(),
             "bench hybrid: layout {} needs {} ranks, but the communicator has {}", c.layout(),
             c.ranks(), comm.size());
  JobSpec job = base;
  ParallelConfig& p = job.parallel;
  if (p.strategy == "none") p.strategy = "ddp";
  p.pp = c.pp;
  p.tp = c.tp;
  p.dp = c.dp;
  p.micro_batches = c.micro_batches;
  p.schedule = c.schedule;
  p.pp_chunks = c.chunks;
  p.world_size = comm.size();
  p.backend = comm.backend();
  p.timeout_s = static_cast<double>(comm.options().timeout.count()) / 1000.0;
  job.train.batch_size = c.batch_size;
  job.train.steps = warmup + steps;
  job.train.accumulation_steps = 1;
  const std::vector<FieldError> errors = validate(job);
  if (!errors.empty()) SL_THROW(InvalidArgument, "{}", errors.front().to_string());
  return job;
}

}  // namespace

std::string HybridBenchConfig::layout() const {
  return fmt::format("{}x{}x{}", pp, tp, dp);
}

double HybridBenchResult::stage_bubble(size_t stage) const {
  const double busy = stage_busy_s.at(stage), idle = stage_idle_s.at(stage);
  return busy + idle > 0 ? idle / (busy + idle) : 0.0;
}

double HybridBenchResult::mean_bubble() const {
  if (stage_busy_s.empty()) return 0;
  double sum = 0;
  for (size_t s = 0; s < stage_busy_s.size(); ++s) sum += stage_bubble(s);
  return sum / static_cast<double>(stage_busy_s.size());
}

HybridBenchResult bench_hybrid_config(Communicator& comm, const Dataset& train, const JobSpec& job,
                                      const HybridBenchConfig& config, int64_t warmup,
                                      int64_t steps) {
  SL_ENFORCE(steps >= 1, "bench hybrid: --steps must be >= 1, got {}", steps);
  SL_ENFORCE(warmup >= 0, "bench hybrid: --warmup must be >= 0, got {}", warmup);
  const JobSpec j = config_job(comm, job, config, warmup, steps);

  // Per rank: stage, busy, idle, peak, loss, then the step times.
  constexpr size_t kFixed = 5;
  std::vector<double> mine(kFixed + static_cast<size_t>(steps), 0.0);
  {
    // The ledger outlives the optimizer, whose buffers credit it when they are freed.
    MemoryLedger ledger;
    LedgerScope bind(&ledger);
    std::unique_ptr<HybridShardedOptimizer> opt =
        HybridShardedOptimizer::create(comm, sharded_options(j));
    SamplerOptions sopt;
    sopt.batch_size = j.train.batch_size;
    sopt.seed = j.train.seed;
    sopt.rank = opt->coord().dp;  // every rank of a replica reads the replica's slice
    sopt.world = opt->topology().dp();
    Sampler sampler(train.size(), sopt);
    const double lr = j.optimizer.lr;
    ledger.reset_peaks();  // the steps' peak, not the set-up's
    for (int64_t i = 0; i < warmup; ++i) opt->step(train, sampler.next(), lr);
    const PipelineTimes before = opt->pipeline_times();
    double loss = 0;
    for (int64_t i = 0; i < steps; ++i) {
      const std::vector<int64_t> idx = sampler.next();
      comm.barrier();  // every rank starts the step together: its time is the step's alone
      const Clock::time_point begin = Clock::now();
      loss = opt->step(train, idx, lr);
      mine[kFixed + static_cast<size_t>(i)] =
          std::chrono::duration<double>(Clock::now() - begin).count();
    }
    const PipelineTimes after = opt->pipeline_times();
    mine[0] = opt->coord().pp;
    mine[1] = after.busy - before.busy;
    mine[2] = after.idle - before.idle;
    mine[3] = static_cast<double>(ledger.snapshot().peak_total);
    mine[4] = loss;
    opt.reset();
  }
  const std::vector<double> all = gather_over_ranks(comm, mine);

  HybridBenchResult r;
  r.config = config;
  r.context = j.model.gpt.context;
  r.steps = steps;
  const size_t fields = mine.size();
  const auto pp = static_cast<size_t>(config.pp);
  std::vector<double> slowest(static_cast<size_t>(steps), 0.0), stage_ranks(pp, 0.0);
  r.stage_busy_s.assign(pp, 0.0);
  r.stage_idle_s.assign(pp, 0.0);
  for (int rank = 0; rank < comm.size(); ++rank) {
    const double* v = all.data() + fields * static_cast<size_t>(rank);
    const auto stage = static_cast<size_t>(v[0]);
    SL_ENFORCE_T(InternalError, stage < pp, "bench hybrid: rank {} reports stage {} of {}", rank,
                 stage, pp);
    r.stage_busy_s[stage] += v[1];
    r.stage_idle_s[stage] += v[2];
    stage_ranks[stage] += 1;
    r.peak_bytes_max = std::max(r.peak_bytes_max, static_cast<int64_t>(v[3]));
    for (size_t i = 0; i < slowest.size(); ++i) slowest[i] = std::max(slowest[i], v[kFixed + i]);
  }
  for (size_t s = 0; s < pp; ++s) {
    const double per = std::max(1.0, stage_ranks[s]) * static_cast<double>(steps);
    r.stage_busy_s[s] /= per;
    r.stage_idle_s[s] /= per;
  }
  r.final_loss = mine[4];  // the global loss: the same on every rank
  r.median_step_ms = 1e3 * bench::median(slowest);
  r.min_step_ms = 1e3 * bench::best(slowest);
  if (r.median_step_ms > 0)
    r.tokens_per_s = static_cast<double>(config.batch_size * r.context) / (r.median_step_ms / 1e3);
  return r;
}

std::vector<HybridBenchResult> bench_hybrid_threads(const Dataset& train, const JobSpec& job,
                                                    const std::vector<HybridBenchConfig>& configs,
                                                    int64_t warmup, int64_t steps,
                                                    std::chrono::milliseconds timeout) {
  std::vector<HybridBenchResult> rows;
  for (const HybridBenchConfig& c : configs) {
    CommOptions copts;
    copts.timeout = timeout;
    HybridBenchResult row;
    std::mutex mu;
    run_threads(static_cast<int>(c.ranks()), copts, [&](Communicator& comm) {
      HybridBenchResult r = bench_hybrid_config(comm, train, job, c, warmup, steps);
      if (comm.rank() == 0) {
        std::lock_guard<std::mutex> lock(mu);
        row = std::move(r);
      }
    });
    rows.push_back(std::move(row));
  }
  return rows;
}

void print_hybrid_throughput(const std::vector<HybridBenchResult>& rows, std::ostream& out) {
  double base_ms = 0;
  for (const HybridBenchResult& r : rows)
    if (r.config.ranks() == 1 && base_ms == 0) base_ms = r.median_step_ms;
  out << fmt::format("{:<8} {:>5} {:>3} {:>5} {:>9} {:>9} {:>10} {:>8} {:>7} {:>9} {:>8}\n",
                     "layout", "ranks", "m", "sched", "step ms", "min ms", "tokens/s", "vs 1x1x1",
                     "bubble", "peak MiB", "loss");
  for (const HybridBenchResult& r : rows) {
    const bool piped = r.config.pp > 1;
    out << fmt::format(
        "{:<8} {:>5} {:>3} {:>5} {:>9.2f} {:>9.2f} {:>10.0f} {:>8} {:>7} {:>9.2f} {:>8.4f}\n",
        r.config.layout(), r.config.ranks(), r.config.micro_batches,
        piped ? r.config.schedule : "-", r.median_step_ms, r.min_step_ms, r.tokens_per_s,
        base_ms > 0 ? fmt::format("{:.2f}", base_ms / r.median_step_ms) : "-",
        piped ? percent(r.mean_bubble()) : "-",
        static_cast<double>(r.peak_bytes_max) / (1024.0 * 1024.0), r.final_loss);
  }
  out << "layout: pp x tp x dp; m: micro-batches per replica and step; step ms: median over the "
         "timed\n  steps of the slowest rank's step() (min ms: the fastest step); tokens/s: "
         "batch x context / step ms\nvs 1x1x1: speed-up over one rank; bubble: mean over stages "
         "of idle / (busy + idle) in the\n  pipeline part of the step; peak MiB: the largest "
         "rank's ledger peak during the steps\n";
  out.flush();
}

void print_hybrid_bubble(const std::vector<HybridBenchResult>& rows, std::ostream& out) {
  size_t stages = 0;
  for (const HybridBenchResult& r : rows) stages = std::max(stages, r.stage_busy_s.size());
  std::string head = fmt::format("{:<11} {:>2} {:>2} {:>2} {:>5} {:>8}", "sched", "p", "v", "m",
                                 "batch", "step ms");
  for (size_t s = 0; s < stages; ++s) head += fmt::format(" {:>7}", fmt::format("stage{}", s));
  head += fmt::format(" {:>7} {:>8} {:>7} {:>8} {:>7}\n", "mean", "formula", "sim", "pipe ms",
                      "sim ms");
  out << head;
  for (const HybridBenchResult& r : rows) {
    const int p = static_cast<int>(r.config.pp), m = static_cast<int>(r.config.micro_batches);
    const int v = static_cast<int>(r.config.chunks);
    std::string line = fmt::format("{:<11} {:>2} {:>2} {:>2} {:>5} {:>8.2f}", r.config.schedule, p,
                                   v, m, r.config.batch_size, r.median_step_ms);
    double busy = 0, pipe = 0;
    for (size_t s = 0; s < stages; ++s) {
      if (s < r.stage_busy_s.size()) {
        line += fmt::format(" {:>7}", percent(r.stage_bubble(s)));
        busy += r.stage_busy_s[s];
        pipe += r.stage_busy_s[s] + r.stage_idle_s[s];
      } else {
        line += fmt::format(" {:>7}", "-");
      }
    }
    const double n = static_cast<double>(std::max<size_t>(1, r.stage_busy_s.size()));
    busy /= n;
    pipe /= n;
    // One micro-batch's time through a stage, split 1:2 between forward and backward.
    const double per_op = busy / static_cast<double>(m);
    const ScheduleTiming sim =
        simulate(*make_schedule(r.config.schedule, p, m, v), per_op / 3.0, 2.0 * per_op / 3.0);
    const double formula = interleaved_bubble_fraction_formula(p, m, v);  // v = 1: (p-1)/(m+p-1)
    line += fmt::format(" {:>7} {:>8} {:>7} {:>8.2f} {:>7.2f}\n", percent(r.mean_bubble()),
                        percent(formula), percent(sim.bubble_fraction), 1e3 * pipe,
                        1e3 * sim.step_time);
    out << line;
  }
  out << "stageN: stage N's measured bubble, idle / (busy + idle) over the timed steps (idle: "
         "waiting for a\n  neighbour's activations or gradients); mean: over the stages; "
         "formula: (p-1)/(m+p-1), interleaved (p-1)/(v*m+p-1)\nsim: simulate() with the measured "
         "mean busy time per "
         "micro-batch and stage (split 1:2 into\n  forward and backward, free communication); "
         "pipe ms: measured busy + idle per step (mean over\n  stages); sim ms: the simulated "
         "pipeline time\n";
  out.flush();
}

}  // namespace shardlab
