// shardlab worker JOB.json: one rank of a sharded job, for ranks started by mpirun or srun (and
// by `shardlab run` with backend mpi). Rank 0 prints the progress and the summary; with --verify
// it then compares the trained model with the same job in one process, as `run --verify` does
// (verify.h), and exits 1 when they differ: how a run under srun is checked where it ran.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>

#include "engine/cli/args.h"
#include "engine/cli/command_spec.h"
#include "engine/cli/commands.h"
#include "engine/cli/sharded_report.h"
#include "engine/cli/telemetry_setup.h"
#include "engine/cli/verify.h"
#include "engine/core/device.h"
#include "engine/core/timer.h"
#include "engine/run/device_training.h"
#include "engine/job/job_spec.h"
#include "engine/launch/compute_threads.h"
#include "engine/launch/prepared_job.h"
#include "engine/launch/slow_ranks.h"
#include "engine/run/rank_runner.h"

#if SHARDLAB_HAVE_MPI
#include "engine/cli/stop_reporter.h"
#include "engine/comm/flight_recorder.h"
#include "engine/comm/mpi/world.h"
#endif

namespace shardlab::cli {

int worker_command(const std::vector<std::string>& argv) {
  Args args(argv, arg_spec("worker"));
  if (args.positional().size() != 1)
    SL_THROW(UsageError,
             "worker needs exactly one job file, e.g. mpirun -np 4 shardlab worker "
             "resources/jobs/fashion_mlp.json");
#if !SHARDLAB_HAVE_MPI
  SL_THROW(InvalidArgument,
           "worker: this build has no MPI (install libopenmpi-dev and rebuild); use "
           "parallel.backend threads with shardlab run instead");
#else
  if (args.has("--tolerance") && !args.has("--verify"))
    SL_THROW(UsageError, "--tolerance only applies with --verify");
  const double tolerance = args.has("--tolerance") ? parse_tolerance(args.get("--tolerance")) : 0.0;
  Stopwatch total;
  JobSpec job = load_job(args.positional()[0], args.all("--set"));
  const std::string problem = device_job_problem(job);
  SL_ENFORCE(problem.empty(), "device: {}", problem);
  require_device(job.device);
  SL_ENFORCE(job.parallel.strategy != "none",
             "parallel.strategy: a worker runs one rank of a sharded job; choose ddp, zero1, "
             "zero2 or fsdp (or use shardlab run for one process)");
  // A worker is an MPI process whatever the file says (its backend tells `shardlab run` how to
  // start ranks; here they are already started).
  job.parallel.backend = "mpi";
  MpiSession session(nullptr, nullptr);
  SL_ENFORCE(session.world_size() == job.parallel.world_size,
             "parallel.world_size: the job asks for {} ranks but mpirun started {} (use -np {} or "
             "--set parallel.world_size={})",
             job.parallel.world_size, session.world_size(), job.parallel.world_size,
             session.world_size());
  // Prepared once: the topology (this rank's HELLO, the comm records' mapping) and the world's
  // communication options now; the data once this rank has joined its world.
  launch::PreparedJob prepared = launch::plan_job(job);
  launch::use_compute_threads(job);  // the node's cores shared among its ranks
  const auto totals =
      std::make_shared<CommTotalsSink>(session.world_size(), prepared.comm_topology());
  // This rank's telemetry: a publisher to --telemetry, and/or its own --record file.
  RunTelemetry tel(args, prepared, {session.world_rank()}, false);
  CommOptions& copts = prepared.comm;
  copts.sink = with_comm_telemetry(totals, tel.sink_of(), prepared.comm_topology());
  // Flight records (the last operations of a rank whose communication failed) go next to the
  // checkpoints when the job has a folder for them; otherwise they stay in memory.
  if (!job.train.checkpoint_dir.empty()) copts.flight_dir = job.train.checkpoint_dir + "/flight";
  copts.flight_recorder = std::make_shared<FlightRecorder>(
      FlightRecorderOptions{.capacity = copts.flight_capacity, .rank = session.world_rank()});
  const StopReporter stop_reporter(session.world_rank(), session.world_size(), copts.timeout,
                                   copts.flight_recorder, copts.flight_dir);
  auto world = make_mpi_world(copts);
  const bool root = world->rank() == 0;
  launch::load_data(prepared);
  const JobSpec& completed = prepared.job;
  if (root)
    print_job_header(completed, prepared.data.description, model_layout(completed.model).size());
  RankRunOptions opts;
  opts.callbacks = progress_printer(completed.model.kind == "gpt", args.has("--quiet"));
  opts.comm_totals = totals;
  opts.save_model_path = args.get("--save-model");
  opts.telemetry = tel.sink_of();
  opts.resume_from = args.get("--resume");
  opts.slow_ranks = launch::slow_ranks_from_environment();
  if (root) opts.on_checkpoint = checkpoint_printer(args.has("--quiet"));
  if (!opts.resume_from.empty()) {
    // Every rank checks, so a missing checkpoint fails them all alike before any collective.
    const std::string line = check_resume(completed, opts.resume_from);
    if (root && !args.has("--quiet")) fmt::print("{}\n", line);
  }
  const ParallelRunResult run = run_rank(completed, *world, prepared.data, opts);
  if (root) print_sharded_summary(completed, run, total.seconds());
  tel.close();
  // Every rank holds the full trained parameters; the others wait in MPI_Finalize meanwhile.
  if (root && args.has("--verify"))
    return verify_against_single_process(completed, run.result.params, tolerance) ? 0 : 1;
  return 0;
#endif
}

}  // namespace shardlab::cli
