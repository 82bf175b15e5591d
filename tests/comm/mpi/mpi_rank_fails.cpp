// Helper for tst_comm_mpi_failure (run under mpirun): every rank joins the world, then rank
// FAIL_RANK (argument; default 1, "none" for no failure) throws while the others enter an
// all-reduce with a 60 s timeout. main() handles the error the way the shardlab command does: one
// line on stderr and a non-zero exit. The MpiSession lives inside the try, so unwinding skips
// MPI_Finalize; mpirun sees a rank end without finalizing and ends the job at once instead of
// leaving the peers to time out.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/comm/mpi/world.h"

int main(int argc, char** argv) {
  int rank = -1;
  try {
    shardlab::MpiSession session(&argc, &argv);
    rank = session.world_rank();
    const int fail_rank = argc > 1 && std::strcmp(argv[1], "none") == 0 ? -1
                          : argc > 1                                    ? std::atoi(argv[1])
                                                                        : 1;
    shardlab::CommOptions options;
    options.timeout = std::chrono::seconds(60);
    auto world = shardlab::make_mpi_world(options);
    world->barrier();  // everyone is up: the failure below happens mid-job
    if (rank == fail_rank) SL_THROW(shardlab::Error, "rank {}: boom", rank);
    std::vector<float> v(1024, 1.0f);
    world->all_reduce(v, shardlab::ReduceOp::Sum);
    std::printf("rank %d: all_reduce ok (%g)\n", rank, static_cast<double>(v[0]));
    return 0;
  } catch (const shardlab::Error& e) {
    std::fprintf(stderr, "mpi_rank_fails: %s\n", e.what());
    return 1;
  }
}
