// 3D-parallelism benchmark: the GPT model trained by HybridShardedOptimizer at several
// pp x tp x dp layouts, driving step() directly on every rank of a communicator.
//
//   throughput  per layout: the median step time (each rank times its step()s after a barrier;
//               a step's time is its slowest rank's) and tokens/s = batch * context / step time
//   bubble      per pipeline configuration (tp = dp = 1): every stage's busy and idle time over
//               the timed steps (HybridShardedOptimizer::pipeline_times() deltas), its measured
//               bubble idle / (busy + idle), beside (p-1)/(m+p-1) (bubble_fraction_formula;
//               interleaved with v chunks: (p-1)/(v*m+p-1)) and
//               simulate() with the measured mean op times
//
// Each replica reads its contiguous batch/dp slice of every global batch from a Sampler built
// with rank = its dp coordinate (as HybridShardedOptimizer::optimize does), so every layout trains
// on the same global batches as one process would.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/data/dataset.h"
#include "engine/job/job_spec.h"

namespace shardlab {

// One configuration: the layout, the pipeline's micro-batches and schedule, the global batch.
struct HybridBenchConfig {
  int64_t pp = 1, tp = 1, dp = 1;
  int64_t micro_batches = 1;
  std::string schedule = "1f1b";  // gpipe | 1f1b | interleaved
  int64_t chunks = 1;             // model chunks per stage (interleaved: >= 2)
  int64_t batch_size = 32;        // global batch (all replicas)
  int64_t ranks() const { return pp * tp * dp; }
  std::string layout() const;  // "2x2x2" (pp x tp x dp)
};

// What one configuration measured (the same on every rank).
struct HybridBenchResult {
  HybridBenchConfig config;
  int64_t context = 0;        // tokens per sample
  int64_t steps = 0;          // timed steps
  double median_step_ms = 0;  // median over steps of the slowest rank's step() time
  double min_step_ms = 0;
  double tokens_per_s = 0;  // batch_size * context / median step time
  // Per pipeline stage (pp entries), seconds per timed step averaged over the stage's ranks:
  // running forward/backward ops, and waiting for a neighbouring stage.
  std::vector<double> stage_busy_s, stage_idle_s;
  int64_t peak_bytes_max = 0;  // largest per-rank ledger peak (every category) during the steps
  double final_loss = 0;       // the global loss of the last step

  double stage_bubble(size_t stage) const;  // idle / (busy + idle)
  double mean_bubble() const;               // mean of the stages' bubbles
};

// Runs `config` on every rank of `comm` (collective; comm.size() must be config.ranks()):
// builds a HybridShardedOptimizer from `job` (its model with sizes completed from the data, data,
// optimizer and parallel.strategy; the layout, batch and steps come from `config` and the
// counts), runs `warmup` untimed and `steps` timed steps and returns the figures on every rank.
// Throws InvalidArgument naming the field for a configuration the job validation refuses.
HybridBenchResult bench_hybrid_config(Communicator& comm, const Dataset& train, const JobSpec& job,
                                      const HybridBenchConfig& config, int64_t warmup,
                                      int64_t steps);

// Every configuration in turn, each on a fresh threads world of config.ranks() ranks sharing
// `train`; collectives wait at most `timeout`.
std::vector<HybridBenchResult> bench_hybrid_threads(const Dataset& train, const JobSpec& job,
                                                    const std::vector<HybridBenchConfig>& configs,
                                                    int64_t warmup, int64_t steps,
                                                    std::chrono::milliseconds timeout);

// The throughput table: one row per layout, "vs 1x1x1" relative to the first 1x1x1 row.
void print_hybrid_throughput(const std::vector<HybridBenchResult>& rows, std::ostream& out);
// The bubble table: one row per (schedule, p, m): measured bubble per stage and their mean,
// (p-1)/(m+p-1), and simulate()'s bubble and pipeline time with the measured op times.
void print_hybrid_bubble(const std::vector<HybridBenchResult>& rows, std::ostream& out);

}  // namespace shardlab
