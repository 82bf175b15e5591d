// How many threads a rank computes on: train.threads when the job sets a count (> 0; the default
// is 1), or with 0 the cores this process may run on divided among the ranks sharing them, at
// least 1:
//   strategy none (one rank)          every core the process may use;
//   backend threads, R ranks          cores / R each;
//   backend mpi, L ranks on this node cores / L each (L from OMPI_COMM_WORLD_LOCAL_SIZE, or
//                                     SLURM_NTASKS_PER_NODE under srun; 1 when neither is set).
// The threads go to BLAS (OpenBLAS's GEMMs). A given count gives the same bits on every run, but
// not the same bits as another count (OpenBLAS sums some GEMMs in another order on more threads):
// hence the default of 1, which keeps results independent of the machine (tst_compute_threads).
#pragma once

#include "engine/job/job_spec.h"

namespace shardlab::launch {

// The cores this process may run on (its CPU affinity; 1 when that cannot be read).
int usable_cores();

// Threads per rank for `job` with `ranks_here` ranks of this node sharing the process's cores.
int compute_threads(const JobSpec& job, int ranks_here);

// Ranks of this job on this node: 1 for strategy none, world_size for backend threads, the local
// size from mpirun's or Slurm's environment for backend mpi.
int ranks_on_this_node(const JobSpec& job);

// Sets BLAS to compute_threads(job, ranks_on_this_node(job)) threads and returns that number.
int use_compute_threads(const JobSpec& job);

}  // namespace shardlab::launch
