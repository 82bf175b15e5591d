// The bench's baseline for the mpi backend: the same collectives as plain blocking MPI calls on
// MPI_COMM_WORLD, with the same chunking (engine/comm/communicator.h), so `shardlab bench comm`
// shows what the backend adds on top of MPI.
#pragma once

#include "engine/bench/comm_bench.h"

namespace shardlab {

// A BaselineOp running raw MPI_Allreduce / MPI_Reduce_scatter / MPI_Allgatherv / MPI_Bcast.
BaselineOp raw_mpi_baseline();

}  // namespace shardlab
