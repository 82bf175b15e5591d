// bench_comm_mpi: the mpi backend's blocking collectives against the raw blocking MPI call, in the
// same run. Not a ctest entry (timings need a quiet machine); run it by hand:
//
//   mpirun -np 4 --oversubscribe build/tests/comm/mpi/bench_comm_mpi [op ...] [--max-mib M]
//
// op: all_reduce (default), reduce_scatter, all_gather, broadcast, barrier (sizes ignored). For
// each size the raw call and the backend alternate rep by rep (which goes first alternates too),
// each timed as the slowest rank's time after a barrier; the table shows medians.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/comm/mpi/world.h"
#include "engine/core/error.h"

namespace {

using namespace shardlab;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs `raw` and `backend` alternately; returns their median times in microseconds.
template <typename Raw, typename Backend>
std::pair<double, double> time_pair(MPI_Comm comm, int reps, Raw raw, Backend backend) {
  std::vector<double> t_raw, t_backend;
  auto time_one = [&](auto&& f) {
    MPI_Barrier(comm);
    const auto t0 = std::chrono::steady_clock::now();
    f();
    double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    MPI_Allreduce(MPI_IN_PLACE, &us, 1, MPI_DOUBLE, MPI_MAX, comm);
    return us;
  };
  for (int w = 0; w < 2; ++w) {  // warm-up: buffers, connections, algorithm caches
    raw();
    backend();
  }
  for (int r = 0; r < reps; ++r) {
    if (r % 2 == 0) {
      t_raw.push_back(time_one(raw));
      t_backend.push_back(time_one(backend));
    } else {
      t_backend.push_back(time_one(backend));
      t_raw.push_back(time_one(raw));
    }
  }
  return {median(t_raw), median(t_backend)};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    MpiSession session(&argc, &argv);
    std::vector<std::string> ops;
    size_t max_bytes = size_t{64} << 20;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--max-mib" && i + 1 < argc)
        max_bytes = static_cast<size_t>(std::atoi(argv[++i])) << 20;
      else
        ops.push_back(a);
    }
    if (ops.empty()) ops = {"all_reduce"};

    auto world = make_mpi_world({});
    MPI_Comm raw_comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &raw_comm);
    const int n = world->size(), rank = world->rank();

    for (const std::string& op : ops) {
      if (rank == 0) {
        std::printf("%s, %d ranks (median of the slowest rank's time)\n", op.c_str(), n);
        std::printf("%10s %5s %12s %12s %7s\n", "bytes", "reps", "raw_us", "backend_us", "ratio");
      }
      for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
        const auto count = static_cast<int64_t>(bytes / sizeof(float));
        const int reps = std::clamp(static_cast<int>(4e8 / static_cast<double>(bytes)), 12, 400);
        std::vector<float> a(static_cast<size_t>(count), 1.0f), b(static_cast<size_t>(count));
        const IndexRange mine = chunk_range(count, n, rank);
        std::vector<int> counts(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
        for (int r = 0; r < n; ++r) {
          counts[static_cast<size_t>(r)] = static_cast<int>(chunk_range(count, n, r).size());
          displs[static_cast<size_t>(r)] = static_cast<int>(chunk_range(count, n, r).begin);
        }
        std::span<float> chunk(b.data(), static_cast<size_t>(mine.size()));
        std::span<const float> in_chunk(a.data(), static_cast<size_t>(mine.size()));
        std::pair<double, double> t;
        if (op == "all_reduce") {
          t = time_pair(
              raw_comm, reps,
              [&] {
                MPI_Allreduce(MPI_IN_PLACE, a.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                              raw_comm);
              },
              [&] { world->all_reduce(a, ReduceOp::Sum); });
        } else if (op == "reduce_scatter") {
          t = time_pair(
              raw_comm, reps,
              [&] {
                MPI_Reduce_scatter(a.data(), b.data(), counts.data(), MPI_FLOAT, MPI_SUM, raw_comm);
              },
              [&] { world->reduce_scatter(a, chunk, ReduceOp::Sum); });
        } else if (op == "all_gather") {
          t = time_pair(
              raw_comm, reps,
              [&] {
                MPI_Allgatherv(a.data(), static_cast<int>(mine.size()), MPI_FLOAT, b.data(),
                               counts.data(), displs.data(), MPI_FLOAT, raw_comm);
              },
              [&] { world->all_gather(in_chunk, b); });
        } else if (op == "broadcast") {
          t = time_pair(
              raw_comm, reps,
              [&] { MPI_Bcast(a.data(), static_cast<int>(count), MPI_FLOAT, 0, raw_comm); },
              [&] { world->broadcast(a, 0); });
        } else if (op == "barrier") {  // the size is ignored: the fixed cost of a collective
          t = time_pair(
              raw_comm, reps, [&] { MPI_Barrier(raw_comm); }, [&] { world->barrier(); });
        } else {
          SL_THROW(InvalidArgument, "unknown op '{}'", op);
        }
        if (rank == 0) {
          std::printf("%10zu %5d %12.1f %12.1f %7.3f\n", bytes, reps, t.first, t.second,
                      t.second / t.first);
          std::fflush(stdout);
        }
      }
    }
    MPI_Comm_free(&raw_comm);
    return 0;
  } catch (const shardlab::Error& e) {
    std::fprintf(stderr, "bench_comm_mpi: %s\n", e.what());
    return 1;
  }
}
