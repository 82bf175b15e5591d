// Entry points of the mpi backend: one MpiSession per process, then make_mpi_world().
//
//   int main(int argc, char** argv) {
//     try {
//       shardlab::MpiSession mpi(&argc, &argv);  // inside the try: see ~MpiSession
//       auto world = shardlab::make_mpi_world({});
//       ...
//     } catch (const shardlab::Error& e) { /* one line to stderr */ return 1; }
//   }
#pragma once

#include <memory>

#include "engine/comm/communicator.h"

namespace shardlab {

// Owns MPI's lifetime in this process: MPI_Init_thread on construction, MPI_Finalize on
// destruction. Requests MPI_THREAD_MULTIPLE (every communicator has a progress thread besides the
// callers) and throws CommError if the library provides less. One per process; never calls
// exit(). Throws InvalidArgument, with one line saying how to launch, for a task srun started
// without PMIx (srun --mpi=none or pmi2: SLURM_STEP_ID set, no PMIX_RANK, not under mpirun),
// before MPI_Init (which would abort), and for a world of 1 where OMPI_COMM_WORLD_SIZE, else
// SLURM_NTASKS or SLURM_NPROCS, says more ranks.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  // Skips MPI_Finalize when destroyed by an exception on its way out, or while an operation that
  // timed out is still inside MPI: Finalize waits for every rank, so a failing rank would otherwise
  // hang until its peers time out. The process should then exit non-zero; mpirun sees a rank
  // end without finalizing and tears the job down.
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int world_rank() const { return rank_; }
  int world_size() const { return size_; }

 private:
  int rank_ = 0;
  int size_ = 1;
  int uncaught_at_start_ = 0;
};

// The world as a Communicator named "world", over a duplicate of MPI_COMM_WORLD (so its traffic
// never mixes with other users of MPI_COMM_WORLD). Collective: every rank calls it; bounded by
// options.timeout. Needs a live MpiSession. Flight recorder: options.flight_recorder if set (its
// rank set to the world rank if it had none), else one of options.flight_capacity entries (none
// for 0); the world's split() groups share it (see communicator.h).
std::unique_ptr<Communicator> make_mpi_world(const CommOptions& options);

}  // namespace shardlab
