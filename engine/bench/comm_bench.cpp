#include "engine/bench/comm_bench.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <cstring>
#include <ostream>

#include "engine/bench/harness.h"
#include "engine/core/human_format.h"
#include "engine/core/timer.h"

namespace shardlab {
namespace {

constexpr int64_t kF = sizeof(float);

// Fewer iterations for big messages: aim at ~1 GiB moved per size per rank.
int iters_for(int64_t bytes, const CommBenchOptions& o) {
  const int64_t budget = int64_t{1} << 30;
  return static_cast<int>(std::clamp<int64_t>(budget / std::max<int64_t>(bytes, 1), 2, o.iters));
}

// Time `iters` runs of `fn` after warm-up; the slowest rank's average, agreed on by all ranks.
double timed(Communicator& comm, int warmup, int iters, const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  comm.barrier();
  Stopwatch sw;
  for (int i = 0; i < iters; ++i) fn();
  float t = static_cast<float>(sw.seconds() / iters);
  comm.all_reduce(std::span<float>(&t, 1), ReduceOp::Max);
  return t;
}

std::string human(int64_t bytes) {
  return human_bytes(bytes, {.whole = true});
}

}  // namespace

double measure_memcpy_gbs(int64_t bytes, int reps) {
  std::vector<char> src(static_cast<size_t>(bytes), 1), dst(static_cast<size_t>(bytes), 0);
  size_t r = 0;
  const double best = bench::best(bench::time_each(0, reps, [&] {
    std::memcpy(dst.data(), src.data(), src.size());
    src[r++ % src.size()] ^= dst[0];  // keep the copies observable
  }));
  return static_cast<double>(bytes) / best / 1e9;
}

std::vector<CommBenchRow> bench_collectives(Communicator& comm, const CommBenchOptions& o,
                                            std::ostream* out, const BaselineOp* baseline,
                                            const std::string& baseline_name) {
  SL_ENFORCE(o.min_bytes >= kF && o.max_bytes >= o.min_bytes && o.step_factor >= 2 && o.rounds >= 1,
             "bench comm: need 4 <= min bytes <= max bytes, a step factor >= 2 and rounds >= 1");
  const int n = comm.size();
  const bool print = out && comm.rank() == 0;
  std::vector<CommBenchRow> rows;
  if (print) {
    *out << fmt::format(
        "# {} backend, {} ranks; time per operation: the slowest rank's average, best of {} "
        "rounds\n",
        comm.backend(), n, o.rounds);
    *out << fmt::format(
        "{:>15} {:>10} {:>7} {:>12} {:>12} {:>12}{}\n", "op", "size", "iters", "time (us)",
        "algbw GB/s", "busbw GB/s",
        baseline ? fmt::format(" {:>14} {:>8}", baseline_name + " us", "ratio") : "");
  }
  for (CommOp op : o.ops) {
    for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.step_factor) {
      const int64_t total = bytes / kF;
      const IndexRange mine = chunk_range(total, n, comm.rank());
      std::vector<float> whole(static_cast<size_t>(total), 1.0f);
      std::vector<float> chunk(static_cast<size_t>(mine.size()), 1.0f);
      std::function<void()> run;
      switch (op) {
        case CommOp::AllReduce:
          run = [&] { comm.all_reduce(whole, ReduceOp::Sum); };
          break;
        case CommOp::ReduceScatter:
          run = [&] { comm.reduce_scatter(whole, chunk, ReduceOp::Sum); };
          break;
        case CommOp::AllGather:
          run = [&] { comm.all_gather(chunk, whole); };
          break;
        case CommOp::Broadcast:
          run = [&] { comm.broadcast(whole, 0); };
          break;
        default:
          SL_THROW(InvalidArgument, "bench comm: {} is not benchmarked", to_string(op));
      }
      const int iters = iters_for(bytes, o);
      auto make_row = [&](const std::string& backend, double secs) {
        CommBenchRow r;
        r.backend = backend;
        r.op = op;
        r.ranks = n;
        r.bytes = total * kF;
        r.iters = iters;
        r.seconds = secs;
        r.algbw_gbs = static_cast<double>(r.bytes) / secs / 1e9;
        r.busbw_gbs = r.algbw_gbs * bus_factor(op, n);
        return r;
      };
      // Sums grow each iteration; restart from 1/n so floats stay finite over all rounds.
      auto reset = [&] { std::fill(whole.begin(), whole.end(), 1.0f / static_cast<float>(n)); };
      double best = 1e30, best_base = 1e30;
      for (int round = 0; round < o.rounds; ++round) {
        reset();
        best = std::min(best, timed(comm, round == 0 ? o.warmup : 0, iters, run));
        if (baseline) {
          reset();
          best_base = std::min(best_base, timed(comm, round == 0 ? o.warmup : 0, iters,
                                                [&] { (*baseline)(op, whole, chunk); }));
        }
      }
      rows.push_back(make_row(comm.backend(), best));
      const CommBenchRow mine_row = rows.back();
      std::string extra;
      if (baseline) {
        rows.push_back(make_row(baseline_name, best_base));
        extra = fmt::format(" {:>14.1f} {:>8.3f}", best_base * 1e6, best / best_base);
      }
      if (print) {
        *out << fmt::format("{:>15} {:>10} {:>7} {:>12.1f} {:>12.3f} {:>12.3f}{}\n", to_string(op),
                            human(mine_row.bytes), iters, mine_row.seconds * 1e6,
                            mine_row.algbw_gbs, mine_row.busbw_gbs, extra);
        out->flush();
      }
    }
  }
  return rows;
}

}  // namespace shardlab
