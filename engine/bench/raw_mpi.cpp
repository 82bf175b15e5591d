#include "engine/bench/raw_mpi.h"

#include <mpi.h>

#include <vector>

namespace shardlab {

BaselineOp raw_mpi_baseline() {
  return [](CommOp op, std::span<float> whole, std::span<float> chunk) {
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const auto total = static_cast<int64_t>(whole.size());
    std::vector<int> counts(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      const IndexRange c = chunk_range(total, n, r);
      counts[static_cast<size_t>(r)] = static_cast<int>(c.size());
      displs[static_cast<size_t>(r)] = static_cast<int>(c.begin);
    }
    int rc = MPI_SUCCESS;
    switch (op) {
      case CommOp::AllReduce:
        rc = MPI_Allreduce(MPI_IN_PLACE, whole.data(), static_cast<int>(total), MPI_FLOAT, MPI_SUM,
                           MPI_COMM_WORLD);
        break;
      case CommOp::ReduceScatter:
        rc = MPI_Reduce_scatter(whole.data(), chunk.data(), counts.data(), MPI_FLOAT, MPI_SUM,
                                MPI_COMM_WORLD);
        break;
      case CommOp::AllGather:
        rc = MPI_Allgatherv(chunk.data(), static_cast<int>(chunk.size()), MPI_FLOAT, whole.data(),
                            counts.data(), displs.data(), MPI_FLOAT, MPI_COMM_WORLD);
        break;
      case CommOp::Broadcast:
        rc = MPI_Bcast(whole.data(), static_cast<int>(total), MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
      default:
        SL_THROW(InvalidArgument, "raw MPI baseline: {} not supported", to_string(op));
    }
    SL_ENFORCE_T(CommError, rc == MPI_SUCCESS, "raw MPI {} failed with code {}", to_string(op), rc);
  };
}

}  // namespace shardlab
