// Helper for tst_comm_mpi_flight (run under mpirun -np 2): both ranks make a world with a short
// timeout and a flight folder (argument 1), run a sub-group all-reduce and two world all-reduces,
// then rank 1 skips the third: rank 0 times out, writes its flight record and prints the
// TimeoutError's message on stderr ("mpi_flight_skip: ..."), exiting 1. Rank 1 waits until rank 0
// has given up, then ends without finalizing MPI (an exception), so the job ends at once.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/mpi/world.h"

int main(int argc, char** argv) {
  try {
    shardlab::MpiSession session(&argc, &argv);
    const int rank = session.world_rank();
    shardlab::CommOptions options;
    options.timeout = std::chrono::milliseconds(1500);
    options.flight_dir = argc > 1 ? argv[1] : "flight";
    auto world = shardlab::make_mpi_world(options);
    world->barrier();
    auto solo = world->split(rank, 0, "solo[" + std::to_string(rank) + "]");
    std::vector<float> v(1024, 1.0f);
    solo->all_reduce(v, shardlab::ReduceOp::Sum);
    world->all_reduce(v, shardlab::ReduceOp::Sum);
    world->all_reduce(v, shardlab::ReduceOp::Sum);
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(4));
      SL_THROW(shardlab::Error, "rank 1: skipped the third all_reduce on purpose");
    }
    world->all_reduce(v, shardlab::ReduceOp::Sum);
    std::printf("rank %d: the third all_reduce completed\n", rank);
    return 0;
  } catch (const shardlab::Error& e) {
    std::fprintf(stderr, "mpi_flight_skip: %s\n", e.what());
    return 1;
  }
}
