#include "engine/bench/sharded_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <ostream>
#include <span>
#include <utility>

#include "engine/bench/harness.h"
#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/core/timer.h"
#include "engine/data/sampler.h"
#include "engine/plan/memory/planner.h"
#include "engine/sharding/sharded_options_from_job.h"
#include "engine/strategies/sharded_optimizer.h"
#include "engine/strategies/strategies.h"  // sum_over_ranks

namespace shardlab {
namespace {

using parallel_detail::sum_over_ranks;

int64_t steady_of(const MemoryFigures& f) {
  return f[MemCategory::params] + f[MemCategory::grads] + f[MemCategory::optimizer_state];
}

// What one rank measured in one configuration.
struct RankFigures {
  std::vector<double> step_seconds;
  int64_t steady = 0, planned = 0, peak = 0;
  double comm_seconds = 0, comm_ops = -1;
  double loss = 0;
};

// One configuration on this rank. The ledger outlives the optimizer, whose buffers credit it
// when they are freed (members are destroyed in reverse order).
struct Run {
  JobSpec job;
  std::unique_ptr<MemoryLedger> ledger = std::make_unique<MemoryLedger>();
  std::unique_ptr<ShardedOptimizer> opt;
  std::unique_ptr<Sampler> sampler;
  std::vector<std::pair<Clock::time_point, Clock::time_point>> windows;  // timed steps
  RankFigures figures;
};

void step(Communicator& comm, const Dataset& train, Run& run, bool timed) {
  LedgerScope bind(run.ledger.get());
  const std::vector<int64_t> idx = run.sampler->next();
  const double lr = run.job.optimizer.lr;
  if (!timed) {
    run.opt->step(train, idx, lr);
    return;
  }
  comm.barrier();  // every rank starts the step together: its time is the step's alone
  const Clock::time_point begin = Clock::now();
  run.figures.loss = run.opt->step(train, idx, lr);
  const Clock::time_point end = Clock::now();
  run.figures.step_seconds.push_back(std::chrono::duration<double>(end - begin).count());
  run.windows.emplace_back(begin, end);
}

// Runs `runs` together on this rank: builds them all, then warm-up and timed steps round-robin
// (one step of each in turn), so that they share whatever else the machine is doing.
void run_together(Communicator& comm, const Dataset& train, std::span<Run> runs, int64_t warmup,
                  int64_t steps) {
  for (Run& run : runs) {
    LedgerScope bind(run.ledger.get());
    run.opt = ShardedOptimizer::create(comm, sharded_options(run.job));
    SamplerOptions sopt;
    sopt.batch_size = run.job.train.batch_size;
    sopt.seed = run.job.train.seed;
    sopt.rank = comm.rank();
    sopt.world = comm.size();
    run.sampler = std::make_unique<Sampler>(train.size(), sopt);
    // The peak of the steps, not of the set-up (which briefly holds a model's buffers twice
    // while a strategy pads or shards them).
    run.ledger->reset_peaks();
  }
  for (int64_t i = 0; i < warmup; ++i)
    for (Run& run : runs) step(comm, train, run, false);
  for (int64_t i = 0; i < steps; ++i)
    for (Run& run : runs) step(comm, train, run, true);
  for (Run& run : runs) {
    RankFigures& f = run.figures;
    f.steady = steady_of(run.opt->memory_after_last_step().current);
    f.peak = run.ledger->snapshot().peak_total;
    f.planned = steady_of(
        plan_memory(run.opt->model().layout(), run.job.optimizer, run.job.parallel, comm.size())
            .steady);
    run.opt.reset();
  }
  // Every operation this rank started during a timed step has completed (step() waits for them)
  // and was reported before its wait returned.
  auto sink = std::dynamic_pointer_cast<MemorySink>(comm.options().sink);
  if (!sink) return;
  const std::vector<CommRecord> records = sink->records();
  std::vector<std::vector<std::pair<Clock::time_point, Clock::time_point>>> busy(runs.size());
  for (const CommRecord& r : records) {
    if (r.rank != comm.rank() || r.group != comm.name()) continue;
    for (size_t k = 0; k < runs.size(); ++k) {
      const auto& w = runs[k].windows;
      // The first window ending after the record's start; it holds the record if it began by then.
      auto it =
          std::upper_bound(w.begin(), w.end(), r.start,
                           [](Clock::time_point t, const auto& win) { return t < win.second; });
      if (it != w.end() && it->first <= r.start) busy[k].emplace_back(r.start, r.end);
    }
  }
  // Collectives queue behind each other, so their durations overlap: count the time during which
  // at least one was in flight (the union of the intervals), not the sum.
  for (size_t k = 0; k < runs.size(); ++k) {
    auto& iv = busy[k];
    std::sort(iv.begin(), iv.end());
    double seconds = 0;
    Clock::time_point open{}, close{};
    bool any = false;
    for (const auto& [b, e] : iv) {
      if (any && b <= close) {
        close = std::max(close, e);
        continue;
      }
      if (any) seconds += std::chrono::duration<double>(close - open).count();
      open = b;
      close = e;
      any = true;
    }
    if (any) seconds += std::chrono::duration<double>(close - open).count();
    runs[k].figures.comm_seconds = seconds;
    runs[k].figures.comm_ops = static_cast<double>(iv.size());
  }
}

ShardedBenchRow gather_row(Communicator& comm, const RankFigures& mine, int64_t steps) {
  // Per rank: the step times, then steady, planned, peak, comm seconds, comm ops.
  const size_t fields = static_cast<size_t>(steps) + 5;
  const int world = comm.size();
  std::vector<double> slots(fields * static_cast<size_t>(world), 0.0);
  double* me = slots.data() + fields * static_cast<size_t>(comm.rank());
  std::copy(mine.step_seconds.begin(), mine.step_seconds.end(), me);
  me[steps] = static_cast<double>(mine.steady);
  me[steps + 1] = static_cast<double>(mine.planned);
  me[steps + 2] = static_cast<double>(mine.peak);
  me[steps + 3] = mine.comm_seconds;
  me[steps + 4] = mine.comm_ops;
  const std::vector<double> all = sum_over_ranks(comm, slots);

  ShardedBenchRow row;
  row.ranks = world;
  row.steps = steps;
  row.final_loss = mine.loss;  // the global loss: the same on every rank
  std::vector<double> slowest(static_cast<size_t>(steps), 0.0), rank0(static_cast<size_t>(steps));
  double comm_s = 0, comm_ops = 0;
  bool have_comm = true;
  row.steady_bytes_min = std::numeric_limits<int64_t>::max();
  for (int r = 0; r < world; ++r) {
    const double* v = all.data() + fields * static_cast<size_t>(r);
    for (int64_t i = 0; i < steps; ++i) {
      slowest[static_cast<size_t>(i)] = std::max(slowest[static_cast<size_t>(i)], v[i]);
      if (r == 0) rank0[static_cast<size_t>(i)] = v[i];
    }
    const auto steady = static_cast<int64_t>(std::llround(v[steps]));
    row.steady_bytes_max = std::max(row.steady_bytes_max, steady);
    row.steady_bytes_min = std::min(row.steady_bytes_min, steady);
    row.planned_steady_bytes =
        std::max(row.planned_steady_bytes, static_cast<int64_t>(std::llround(v[steps + 1])));
    row.peak_bytes_max =
        std::max(row.peak_bytes_max, static_cast<int64_t>(std::llround(v[steps + 2])));
    if (v[steps + 4] < 0) have_comm = false;
    comm_s += v[steps + 3];
    comm_ops += v[steps + 4];
  }
  row.median_step_ms = 1e3 * bench::median(slowest);
  row.min_step_ms = 1e3 * bench::best(slowest);
  row.rank0_median_step_ms = 1e3 * bench::median(rank0);
  const double per = static_cast<double>(world) * static_cast<double>(steps);
  if (have_comm) {
    row.comm_ms_per_step = 1e3 * comm_s / per;
    row.comm_ops_per_step = comm_ops / per;
  }
  return row;
}

std::string mib(int64_t bytes) {
  return fmt::format("{:.2f}", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

}  // namespace

std::vector<ShardedBenchRow> bench_sharded(Communicator& comm, const Dataset& train,
                                           const ShardedBenchOptions& options) {
  SL_ENFORCE(options.steps >= 1, "bench sharded: --steps must be >= 1, got {}", options.steps);
  SL_ENFORCE(options.warmup >= 0, "bench sharded: --warmup must be >= 0, got {}", options.warmup);
  std::vector<Run> runs;
  for (bool overlap : options.overlaps) {
    for (const std::string& strategy : options.strategies) {
      Run run;
      JobSpec& job = run.job;
      job = options.job;
      job.parallel.strategy = strategy;
      job.parallel.overlap = overlap;
      job.parallel.world_size = comm.size();
      job.parallel.backend = comm.backend();
      job.train.steps = options.warmup + options.steps;
      if (strategy == "fsdp") job.parallel.bucket_mb = ParallelConfig{}.bucket_mb;
      const std::vector<FieldError> errors = validate(job);
      if (!errors.empty()) SL_THROW(InvalidArgument, "{}", errors.front().to_string());
      runs.push_back(std::move(run));
    }
  }
  if (options.interleave) {
    run_together(comm, train, runs, options.warmup, options.steps);
  } else {
    for (Run& run : runs)
      run_together(comm, train, std::span<Run>(&run, 1), options.warmup, options.steps);
  }
  std::vector<ShardedBenchRow> rows;
  for (Run& run : runs) {
    ShardedBenchRow row = gather_row(comm, run.figures, options.steps);
    row.strategy = run.job.parallel.strategy;
    row.overlap = run.job.parallel.overlap;
    rows.push_back(std::move(row));
  }
  for (ShardedBenchRow& row : rows)
    for (const ShardedBenchRow& ddp : rows)
      if (ddp.strategy == "ddp" && ddp.overlap == row.overlap && ddp.median_step_ms > 0)
        row.vs_ddp = row.median_step_ms / ddp.median_step_ms;
  return rows;
}

void print_sharded_bench(const std::vector<ShardedBenchRow>& rows, std::ostream& out) {
  out << fmt::format("{:<8} {:>7} {:>9} {:>9} {:>7} {:>10} {:>10} {:>10} {:>9} {:>8} {:>9}\n",
                     "strategy", "overlap", "step ms", "rank0 ms", "vs ddp", "steady MiB",
                     "plan MiB", "peak MiB", "comm ms", "comm ops", "loss");
  bool differ = false;
  for (const ShardedBenchRow& r : rows) {
    const bool d = r.steady_bytes_min != r.steady_bytes_max;
    differ = differ || d;
    out << fmt::format(
        "{:<8} {:>7} {:>9.2f} {:>9.2f} {:>7} {:>10} {:>10} {:>10} {:>9} {:>8} {:>9.4f}\n",
        r.strategy, r.overlap ? "on" : "off", r.median_step_ms, r.rank0_median_step_ms,
        r.vs_ddp > 0 ? fmt::format("{:.2f}", r.vs_ddp) : "-",
        mib(r.steady_bytes_max) + (d ? "*" : ""), mib(r.planned_steady_bytes),
        mib(r.peak_bytes_max),
        r.comm_ops_per_step >= 0 ? fmt::format("{:.2f}", r.comm_ms_per_step) : "-",
        r.comm_ops_per_step >= 0 ? fmt::format("{:.1f}", r.comm_ops_per_step) : "-", r.final_loss);
  }
  out << "step ms: median over the timed steps of the slowest rank's step() (rank0 ms: rank 0's "
         "own)\n"
         "steady MiB: params + grads + optimizer state per rank after the last step, measured by "
         "the\n  ledger (largest rank"
      << (differ ? "; * where ranks differ" : "")
      << "); plan MiB: the planner's formula for the same\n"
         "peak MiB: the ledger's peak over all categories (activations, comm buffers) during the "
         "steps\n"
         "comm ms: per step and rank, wall time with at least one collective in flight (from the "
         "call\n  to completion: with overlap on, partly hidden behind compute); comm ops: their "
         "count\n";
  for (bool overlap : {true, false}) {
    const ShardedBenchRow* z = nullptr;
    for (const ShardedBenchRow& r : rows)
      if (r.strategy == "zero2" && r.overlap == overlap && r.vs_ddp > 0) z = &r;
    if (z)
      out << fmt::format("overlap {:<3}: zero2 / ddp step time = {:.2f} (goal <= 1.15){}\n",
                         overlap ? "on" : "off", z->vs_ddp, z->vs_ddp <= 1.15 ? "" : "  MISSED");
  }
  out.flush();
}

}  // namespace shardlab
