// shardlab bench comm: collective bandwidth per backend, nccl-tests style.
//   --backend threads --ranks N   ranks as threads of this process; single-core memcpy beside it
//   --backend mpi                 run under mpirun; raw MPI calls measured beside each row
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iostream>
#include <sstream>

#include "engine/bench/comm_bench.h"
#include "engine/cli/args.h"
#include "engine/cli/command_spec.h"
#include "engine/cli/commands.h"
#include "engine/cli/json_output.h"
#include "engine/comm/threads/world.h"

#if defined(SHARDLAB_HAVE_MPI) && SHARDLAB_HAVE_MPI
#include "engine/bench/raw_mpi.h"
#include "engine/comm/mpi/world.h"
#endif

namespace shardlab::cli {
namespace {

std::vector<CommOp> parse_ops(const std::string& list) {
  if (list.empty()) return CommBenchOptions{}.ops;
  std::vector<CommOp> ops;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    bool found = false;
    for (CommOp op :
         {CommOp::AllReduce, CommOp::ReduceScatter, CommOp::AllGather, CommOp::Broadcast})
      if (item == to_string(op)) {
        ops.push_back(op);
        found = true;
      }
    if (!found)
      SL_THROW(UsageError,
               "--ops: unknown operation '{}' (known: all_reduce, reduce_scatter, all_gather, "
               "broadcast)",
               item);
  }
  return ops;
}

// The best bus bandwidth of `op` at exactly `bytes`, from this backend's rows.
double busbw_at(const std::vector<CommBenchRow>& rows, const std::string& backend, CommOp op,
                int64_t bytes) {
  for (const auto& r : rows)
    if (r.backend == backend && r.op == op && r.bytes == bytes) return r.busbw_gbs;
  return 0;
}

// --json: the rows as one document (fields: command_table.cpp).
Json comm_json(const std::string& backend, int ranks, const std::vector<CommBenchRow>& rows) {
  Json out{{"bench", "comm"}, {"backend", backend}, {"ranks", ranks}};
  out["rows"] = Json::array();
  for (const CommBenchRow& r : rows)
    out["rows"].push_back(Json{{"backend", r.backend},
                               {"op", to_string(r.op)},
                               {"ranks", r.ranks},
                               {"bytes", r.bytes},
                               {"iters", r.iters},
                               {"seconds", r.seconds},
                               {"algbw_gb_per_second", r.algbw_gbs},
                               {"busbw_gb_per_second", r.busbw_gbs}});
  return out;
}

}  // namespace

int bench_comm_command(const std::vector<std::string>& argv) {
  Args args(argv, arg_spec("bench comm"));
  args.expect_no_positional();
  CommBenchOptions o;
  o.min_bytes = args.get_int("--min-bytes", o.min_bytes, 4, int64_t{1} << 32);
  o.max_bytes = args.get_int("--max-bytes", o.max_bytes, o.min_bytes, int64_t{1} << 32);
  o.iters = static_cast<int>(args.get_int("--iters", o.iters, 2, 10000));
  o.rounds = static_cast<int>(args.get_int("--rounds", o.rounds, 1, 1000));
  o.ops = parse_ops(args.get("--ops"));
  CommOptions copt;
  copt.timeout = std::chrono::seconds(args.get_int("--timeout-s", 60, 1, 86400));
  const std::string backend = args.get("--backend", "threads");
  const bool json = args.has("--json");
  StdoutToStderr text_to_stderr(json);

  if (backend == "threads") {
    const int ranks = static_cast<int>(args.get_int("--ranks", 4, 1, 256));
    constexpr int64_t k64M = int64_t{64} << 20;
    const double memcpy_gbs = measure_memcpy_gbs(k64M, 10);
    fmt::print("# single-core memcpy, 64 MiB: {:.2f} GB/s\n", memcpy_gbs);
    std::vector<CommBenchRow> rows;
    run_threads(ranks, copt, [&](Communicator& comm) {
      auto r = bench_collectives(comm, o, &std::cout);
      if (comm.rank() == 0) rows = std::move(r);
    });
    const double bw = busbw_at(rows, "threads", CommOp::AllReduce, k64M);
    if (bw > 0)
      fmt::print("# all_reduce busbw at 64 MiB: {:.2f} GB/s = {:.0f}% of single-core memcpy\n", bw,
                 100.0 * bw / memcpy_gbs);
    if (json) {
      text_to_stderr.restore();
      Json out = comm_json(backend, ranks, rows);
      out["memcpy_gb_per_second"] = memcpy_gbs;
      print_json(out);
    }
    return 0;
  }
  if (backend == "mpi") {
#if defined(SHARDLAB_HAVE_MPI) && SHARDLAB_HAVE_MPI
    MpiSession session(nullptr, nullptr);
    auto world = make_mpi_world(copt);
    const BaselineOp raw = raw_mpi_baseline();
    const auto rows = bench_collectives(*world, o, &std::cout, &raw, "raw MPI");
    if (world->rank() == 0) {
      // The goal: within 3% of raw MPI from 1 MiB up.
      double worst = 0;
      for (size_t i = 0; i + 1 < rows.size(); i += 2)
        if (rows[i].bytes >= (int64_t{1} << 20))
          worst = std::max(worst, rows[i].seconds / rows[i + 1].seconds);
      if (worst > 0)
        fmt::print("# from 1 MiB up, the mpi backend takes at most {:.3f}x the time of raw MPI\n",
                   worst);
      if (json) {
        text_to_stderr.restore();
        print_json(comm_json(backend, world->size(), rows));
      }
    }
    return 0;
#else
    SL_THROW(UsageError, "--backend mpi: this shardlab was built without MPI");
#endif
  }
  SL_THROW(UsageError, "--backend: unknown backend '{}' (known: threads, mpi)", backend);
}

}  // namespace shardlab::cli
