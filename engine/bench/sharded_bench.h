// Sharded-optimizer benchmark: every strategy (ddp, zero1, zero2, fsdp) x overlap (on, off) on
// one model and one data set, driving ShardedOptimizer::step() directly on every rank of a
// communicator. Per configuration it measures the step time (each rank times its step()s; the
// step's time is the slowest rank's, the figure reported is the median over the timed steps),
// the memory each rank holds (its own MemoryLedger: params + grads + optimizer state after the
// last step, beside the planner's formula, and the peak over all categories during the steps)
// and the time spent in collectives.
//
// Works on any Communicator (threads: ranks as threads of one process, sharing the data set;
// mpi: one process per rank), so every backend is measured by the same code.
//
// Communication time comes from the communicator's CommRecords: when comm.options().sink is a
// MemorySink (install one when making the world), the records of this rank on the world group
// that started during the timed steps give the wall time during which at least one collective was
// in flight (the union of their intervals: queued collectives overlap). A record lasts from the
// call to the completion, so an overlapped collective counts its whole time in flight, not only
// the part a rank waited for.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/data/dataset.h"
#include "engine/job/job_spec.h"

namespace shardlab {

struct ShardedBenchOptions {
  // The job every configuration runs: model (sizes completed from the data), data, optimizer and
  // train.batch_size (the global batch). parallel.strategy, overlap and world_size are set per
  // configuration; parallel.backend should name the backend of the communicator.
  JobSpec job;
  std::vector<std::string> strategies = {"ddp", "zero1", "zero2", "fsdp"};
  std::vector<bool> overlaps = {true, false};
  int64_t warmup = 3;  // untimed steps first (first-touch allocations, caches)
  int64_t steps = 20;  // timed steps
  // true: build every configuration first, then run their steps round-robin (one step of each in
  // turn), so that all see the same background load on a shared machine; each rank then holds
  // every configuration's buffers at once. false: one configuration after the other.
  bool interleave = true;
};

struct ShardedBenchRow {
  std::string strategy;
  bool overlap = true;
  int ranks = 0;
  int64_t steps = 0;          // timed steps
  double median_step_ms = 0;  // median over steps of the slowest rank's step() time
  double min_step_ms = 0;     // fastest step (the slowest rank's)
  double rank0_median_step_ms = 0;
  double vs_ddp = 0;  // median_step_ms / ddp's with the same overlap (0 when ddp did not run)
  // Bytes of params + grads + optimizer state after the last step: measured by the ledger (the
  // largest over ranks, and the smallest, to show when ranks differ) and planned.
  int64_t steady_bytes_max = 0;
  int64_t steady_bytes_min = 0;
  int64_t planned_steady_bytes = 0;
  // The largest over ranks of the ledger's peak total (every category, activations and
  // communication buffers included) during the warm-up and timed steps (set-up excluded).
  int64_t peak_bytes_max = 0;
  // Per step, averaged over steps and ranks: wall time with a collective in flight and their
  // count (0 and -1 when the communicator has no MemorySink).
  double comm_ms_per_step = 0;
  double comm_ops_per_step = -1;
  double final_loss = 0;  // the global loss of the last step (a sanity figure)
};

// Runs every configuration of `options` on every rank of `comm` (collective) and returns the rows
// on every rank. `train` is this rank's view of the training set (ranks may share one). Throws
// InvalidArgument naming the field for a configuration the job validation refuses (e.g. a global
// batch not divisible by the world size).
std::vector<ShardedBenchRow> bench_sharded(Communicator& comm, const Dataset& train,
                                           const ShardedBenchOptions& options);

// The aligned table, then one goal line per overlap setting:
// "overlap on:  zero2 / ddp step time = X.XX (goal <= 1.15)".
void print_sharded_bench(const std::vector<ShardedBenchRow>& rows, std::ostream& out);

}  // namespace shardlab
