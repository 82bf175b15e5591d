// The costs of ShardLab's CPU kernels on one core of this machine (engine/plan/cpu_ops.h), for
// `shardlab plan --calibrate`: kernels::gemm over a grid of shapes (m, n, k each 16, 64, 256,
// 1024), and every other kernel of a training step at one fixed size (1024 rows of 256 floats;
// attention at 8 sequences of 128 tokens, 4 heads of 32), the median of several timings each,
// and what ranks meeting in a collective cost at 1, 2 and 4 ranks per core (CpuOpCosts::sync).
// The sizes are the machine's measurement, not a job's: `shardlab plan --job` composes any job
// from them.
#pragma once

#include "engine/comm/communicator.h"
#include "engine/plan/cpu_ops.h"

namespace shardlab {

// The meeting measurement, on any backend (the mpi one runs it under mpirun): every rank in a
// pair with its neighbour (ranks 2i and 2i + 1) alternates a fixed piece of work (20 GEMMs of
// 64 x 64 x 64, sync_work_seconds() on one core) and an all-reduce of 4 floats with its pair,
// 400 times. paired_meetings_seconds returns the loop's wall seconds (between two barriers of
// `world`; the median of 5 loops); sync_cost turns that into the cost of one meeting beyond the
// work at a fair share of `cores` cores.
double sync_work_seconds();
double paired_meetings_seconds(Communicator& world);
plan::CpuOpCosts::Sync sync_cost(double wall, double work, int ranks, int cores);

// Takes a few seconds; call with one BLAS thread set. `cores`: the cores a job's ranks share
// (the sync figures run 1, 2 and 4 ranks per core).
plan::CpuOpCosts measure_cpu_ops(int cores);

}  // namespace shardlab
