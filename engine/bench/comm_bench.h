// Collective benchmarks in the manner of nccl-tests: for each operation and size, time `iters`
// back-to-back operations after `warmup`, take the slowest rank's average, and report algbw and
// busbw by nccl-tests' definitions (see engine/comm/comm_record.h). Works on any Communicator, so
// every backend is measured by the same code; an optional baseline (raw MPI calls) runs beside it.
//
// Shared machines are noisy, so each size is measured in `rounds` rounds, alternating the backend
// and the baseline inside each round so both see the same interference, and the best round of
// each is reported.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"

namespace shardlab {

struct CommBenchOptions {
  int64_t min_bytes = int64_t{1} << 10;    // 1 KiB
  int64_t max_bytes = int64_t{256} << 20;  // 256 MiB
  int64_t step_factor = 2;                 // sizes grow by this factor
  int warmup = 2;
  int iters = 10;  // at most; fewer for large sizes so each size costs about the same time
  int rounds = 5;  // repetitions of the timed loop; the best is reported
  std::vector<CommOp> ops = {CommOp::AllReduce, CommOp::ReduceScatter, CommOp::AllGather,
                             CommOp::Broadcast};
};

struct CommBenchRow {
  std::string backend;  // "threads", "mpi", "raw-mpi"
  CommOp op = CommOp::AllReduce;
  int ranks = 0;
  int64_t bytes = 0;  // S, the whole array
  int iters = 0;
  double seconds = 0;  // per operation, slowest rank, best round
  double algbw_gbs = 0;
  double busbw_gbs = 0;
};

// Runs the same operation with another implementation on the same ranks (e.g. raw MPI calls):
// (op, whole-array buffer, this rank's chunk buffer). For all-reduce and broadcast only `whole`
// is used; reduce-scatter reads whole and writes chunk; all-gather the reverse.
using BaselineOp = std::function<void(CommOp op, std::span<float> whole, std::span<float> chunk)>;

// Called by every rank of `comm`; returns the rows (on every rank) and, on rank 0, prints an
// aligned table to `out` (may be null). With a baseline, each row of `comm` is followed by the
// baseline's row for the same op and size, and the table shows their time ratio.
std::vector<CommBenchRow> bench_collectives(Communicator& comm, const CommBenchOptions& options,
                                            std::ostream* out, const BaselineOp* baseline = nullptr,
                                            const std::string& baseline_name = "");

// Single-core memcpy bandwidth: bytes copied per second (GB/s, 1e9) for a buffer of `bytes`,
// best of `reps`. The reference for the threads backend's goal.
double measure_memcpy_gbs(int64_t bytes, int reps);

}  // namespace shardlab
