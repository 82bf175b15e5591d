// shardlab bench sharded: step time, memory and communication of every sharded strategy
// (ddp, zero1, zero2, fsdp) x overlap (on, off) on an MLP with Adam and Fashion-MNIST.
//   --backend threads --ranks N   ranks as threads of this process, sharing the data set
//   --backend mpi --ranks N       this command again under mpirun (--inner-mpi), a process a rank
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <set>

#include "engine/bench/harness.h"
#include "engine/bench/sharded_bench.h"
#include "engine/cli/args.h"
#include "engine/cli/bench_common.h"
#include "engine/cli/command_spec.h"
#include "engine/cli/commands.h"
#include "engine/cli/json_output.h"
#include "engine/comm/threads/world.h"
#include "engine/job/build.h"
#include "engine/launch/mpirun.h"
#include "engine/plan/memory/planner.h"

#if SHARDLAB_HAVE_MPI
#include "engine/comm/mpi/world.h"
#endif

namespace shardlab::cli {
namespace {

// The options that pass unchanged from the outer command to the ranks under mpirun.
const std::vector<std::string> kForwarded = {"--model",   "--steps",      "--warmup",
                                             "--batch",   "--data",       "--train-limit",
                                             "--overlap", "--strategies", "--timeout-s"};

struct Parsed {
  ShardedBenchOptions bench;
  std::string backend;
  int ranks = 4;
  int cores = 1;
  std::chrono::milliseconds timeout{60000};
  bool json = false;  // --json: one document on stdout, the text on stderr
};

Parsed parse(const Args& args) {
  args.expect_no_positional();
  Parsed p;
  p.backend = args.get("--backend", "threads");
  if (p.backend != "threads" && p.backend != "mpi")
    SL_THROW(UsageError, "--backend: unknown backend '{}' (known: threads, mpi)", p.backend);
  p.ranks = static_cast<int>(args.get_int("--ranks", p.backend == "mpi" ? 2 : 4, 1, 256));
  p.cores = static_cast<int>(args.get_int("--cores", bench::usable_cores(), 1, 1 << 20));
  p.timeout = std::chrono::seconds(args.get_int("--timeout-s", 120, 1, 86400));
  p.json = args.has("--json");

  ShardedBenchOptions& o = p.bench;
  o.steps = args.get_int("--steps", o.steps, 1, 100000);
  o.warmup = args.get_int("--warmup", o.warmup, 0, 100000);
  o.interleave = !args.has("--sequential");
  JobSpec& job = o.job;
  job.name = "bench-sharded";
  job.model.kind = "mlp";
  const std::string model = args.get("--model", "mlp");
  if (model == "mlp")
    job.model.mlp.hidden = {256, 128};
  else if (model == "mlp10m")
    job.model.mlp.hidden = {2560, 2560, 1024};
  else
    SL_THROW(UsageError, "--model: unknown model '{}' (known: mlp, mlp10m)", model);
  job.data.dataset = "fashion-mnist";
  job.data.path = args.get("--data", job.data.path);
  job.data.train_limit = args.get_int("--train-limit", 4096, 1, 60000);
  job.optimizer.name = "adam";
  job.train.batch_size = args.get_int("--batch", 64, 1, 60000);
  job.train.steps = o.warmup + o.steps;
  job.train.log_every = 1;
  job.parallel.backend = p.backend;
  job.parallel.world_size = p.ranks;
  job.parallel.timeout_s = static_cast<double>(p.timeout.count()) / 1000.0;
  if (job.train.batch_size % p.ranks != 0)
    SL_THROW(UsageError, "--batch: the global batch ({}) must divide by --ranks ({})",
             job.train.batch_size, p.ranks);
  if (job.train.batch_size > job.data.train_limit)
    SL_THROW(UsageError, "--batch: the global batch ({}) exceeds --train-limit ({})",
             job.train.batch_size, job.data.train_limit);

  const std::string overlap = args.get("--overlap", "both");
  if (overlap == "both")
    o.overlaps = {true, false};
  else if (overlap == "on")
    o.overlaps = {true};
  else if (overlap == "off")
    o.overlaps = {false};
  else
    SL_THROW(UsageError, "--overlap: expected on, off or both, got '{}'", overlap);
  if (args.has("--strategies")) {
    o.strategies = split_list(args.get("--strategies"));
    for (const std::string& s : o.strategies)
      if (s != "ddp" && s != "zero1" && s != "zero2" && s != "fsdp")
        SL_THROW(UsageError, "--strategies: unknown strategy '{}' (known: ddp, zero1, zero2, fsdp)",
                 s);
    if (o.strategies.empty()) SL_THROW(UsageError, "--strategies: no strategy named");
  }
  return p;
}

void print_header(const Parsed& p, const Datasets& data, const ModelConfig& model) {
  const JobSpec& job = p.bench.job;
  const int64_t params = model_layout(model).size();
  fmt::print("bench sharded: mlp {}-{}-{}, {} parameters ({:.1f} MiB fp32), adam lr {:g}\n",
             model.mlp.input_dim, fmt::join(model.mlp.hidden, "-"), model.mlp.num_classes, params,
             static_cast<double>(params) * 4.0 / (1024.0 * 1024.0), job.optimizer.lr);
  fmt::print("data: {}\n", data.description);
  fmt::print(
      "{} backend: {} ranks on {} cores{}, global batch {} ({} per rank), buckets {:g} MiB "
      "(fsdp: per block), 1 BLAS thread per rank\n",
      p.backend, p.ranks, p.cores, p.ranks > p.cores ? " (oversubscribed)" : "",
      job.train.batch_size, job.train.batch_size / p.ranks, job.parallel.bucket_mb);
  double load[1] = {0};
  const bool have_load = getloadavg(load, 1) == 1;
  fmt::print("{} warm-up + {} timed steps per configuration, {}\n", p.bench.warmup, p.bench.steps,
             p.bench.interleave ? "configurations interleaved step by step (--sequential: one "
                                  "after the other)"
                                : "one configuration after the other");
  if (have_load) fmt::print("load average (1 min) at start: {:.2f}\n", load[0]);
  std::fflush(stdout);
}

// --json: the rows as one document (fields: command_table.cpp).
void print_rows_json(const Parsed& p, const std::vector<ShardedBenchRow>& rows) {
  Json out{{"bench", "sharded"},
           {"backend", p.backend},
           {"ranks", p.ranks},
           {"parameters", model_layout(p.bench.job.model).size()},
           {"rows", Json::array()}};
  for (const ShardedBenchRow& r : rows)
    out["rows"].push_back(Json{{"strategy", r.strategy},
                               {"overlap", r.overlap},
                               {"ranks", r.ranks},
                               {"steps", r.steps},
                               {"median_step_ms", r.median_step_ms},
                               {"min_step_ms", r.min_step_ms},
                               {"rank0_median_step_ms", r.rank0_median_step_ms},
                               {"vs_ddp", r.vs_ddp},
                               {"steady_bytes_max", r.steady_bytes_max},
                               {"steady_bytes_min", r.steady_bytes_min},
                               {"planned_steady_bytes", r.planned_steady_bytes},
                               {"peak_bytes_max", r.peak_bytes_max},
                               {"comm_ms_per_step", r.comm_ms_per_step},
                               {"comm_ops_per_step", r.comm_ops_per_step},
                               {"final_loss", r.final_loss}});
  print_json(out);
}

// Loads the data and completes the model's sizes from it.
Datasets load_data(ShardedBenchOptions& o) {
  return load_completed_data(o.job);
}

int run_threads_bench(Parsed& p) {
  StdoutToStderr text_to_stderr(p.json);
  const Datasets data = load_data(p.bench);
  print_header(p, data, p.bench.job.model);
  CommOptions copts;
  copts.timeout = p.timeout;
  copts.sink = std::make_shared<MemorySink>();
  std::vector<ShardedBenchRow> rows;
  run_threads(p.ranks, copts, [&](Communicator& comm) {
    auto r = bench_sharded(comm, *data.train, p.bench);
    if (comm.rank() == 0) rows = std::move(r);
  });
  print_sharded_bench(rows, std::cout);
  if (p.json) {
    text_to_stderr.restore();
    print_rows_json(p, rows);
  }
  return 0;
}

#if SHARDLAB_HAVE_MPI
int run_inner_mpi(Parsed& p) {
  StdoutToStderr text_to_stderr(p.json);
  MpiSession session(nullptr, nullptr);
  SL_ENFORCE(session.world_size() == p.ranks, "bench sharded: --ranks is {} but mpirun started {}",
             p.ranks, session.world_size());
  CommOptions copts;
  copts.timeout = p.timeout;
  copts.sink = std::make_shared<MemorySink>();
  auto world = make_mpi_world(copts);
  const Datasets data = load_data(p.bench);
  if (world->rank() == 0) print_header(p, data, p.bench.job.model);
  const auto rows = bench_sharded(*world, *data.train, p.bench);
  if (world->rank() == 0) print_sharded_bench(rows, std::cout);
  if (p.json && world->rank() == 0) {
    text_to_stderr.restore();
    print_rows_json(p, rows);
  }
  return 0;
}
#endif

}  // namespace

int bench_sharded_command(const std::vector<std::string>& argv) {
  const Args args(argv, arg_spec("bench sharded"));
  Parsed p = parse(args);
  if (p.backend == "threads") return run_threads_bench(p);
#if !SHARDLAB_HAVE_MPI
  SL_THROW(InvalidArgument,
           "--backend mpi: this shardlab was built without MPI (install "
           "libopenmpi-dev and rebuild, or use --backend threads)");
#else
  if (args.has("--inner-mpi")) return run_inner_mpi(p);
  // Catch configuration mistakes here, once, rather than on every rank.
  {
    JobSpec job = p.bench.job;
    job.parallel.strategy = "ddp";
    const std::vector<FieldError> errors = validate(job);
    if (!errors.empty()) SL_THROW(InvalidArgument, "{}", errors.front().to_string());
  }
  std::vector<std::string> inner{launch::this_executable(),
                                 "bench",
                                 "sharded",
                                 "--inner-mpi",
                                 "--backend",
                                 "mpi",
                                 "--ranks",
                                 std::to_string(p.ranks),
                                 "--cores",
                                 std::to_string(p.cores)};
  for (const std::string& name : kForwarded)
    if (args.has(name)) {
      inner.push_back(name);
      inner.push_back(args.get(name));
    }
  if (args.has("--sequential")) inner.push_back("--sequential");
  if (p.json) inner.push_back("--json");  // rank 0 prints the document
  std::fflush(stdout);
  const int rc = launch::run_mpirun(p.ranks, inner);
  SL_ENFORCE(rc == 0, "mpirun exited with status {}: a rank failed (its error is printed above)",
             rc);
  return 0;
#endif
}

}  // namespace shardlab::cli
