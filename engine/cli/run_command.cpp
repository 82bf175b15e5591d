// shardlab run JOB.json: load and validate the job, then train it: in this process with the plain
// Trainer (parallel.strategy none), as world_size ranks on threads of this process, or as
// world_size processes that it starts under mpirun (`shardlab worker`). Prints a progress line per
// logging interval and a summary; sharded runs add the per-rank memory table, and --verify the
// comparison with the same job in one process. With --max-restarts N a sharded run that fails is
// run again from its last checkpoint, at most N times (restart.h).
//
// "device": "cuda" runs on GPUs: strategy none on GPU 0 in this process; a job's ranks (threads
// or mpi) as on the cpu, each rank on a GPU of its own or sharing one (rank_runner.h), over NCCL
// where threads ranks have a GPU each (engine/run/device_training.h, cuda_over_nccl). Checked right
// after the job is loaded, before any data is read: first what the job asks of the device
// (device_job_problem, the same answer on every machine), then whether this process has the device
// and the GPUs the job needs (require_job_device).
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "engine/cli/args.h"
#include "engine/cli/command_spec.h"
#include "engine/cli/commands.h"
#include "engine/cli/json_output.h"
#include "engine/cli/restart.h"
#include "engine/cli/sharded_report.h"
#include "engine/cli/telemetry_setup.h"
#include "engine/cli/verify.h"
#include "engine/core/device.h"
#include "engine/core/timer.h"
#include "engine/job/build.h"
#include "engine/job/job_spec.h"
#include "engine/launch/compute_threads.h"
#include "engine/launch/hosts.h"
#include "engine/launch/job_state.h"
#include "engine/launch/mpirun.h"
#include "engine/launch/prepared_job.h"
#include "engine/launch/threads_run.h"
#include "engine/launch/workers.h"
#include "engine/model/model_file.h"
#include "engine/run/device_training.h"
#include "engine/train/step_telemetry.h"
#include "net/auth.h"
#include "net/publisher.h"

namespace shardlab::cli {
namespace {

// "device: cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)" (", 4 GPUs: cuda:0..cuda:3" for ranks).
// The GPUs a cuda job of `ranks` ranks in this process uses (rank r on GPU r mod the usable ones).
void print_gpu_line(int ranks) {
  const std::string name = describe_gpu(0);
  std::string why;
  const int gpus = std::max(1, std::min(ranks, usable_gpus(&why)));
  if (gpus <= 1 && ranks <= 1)
    fmt::print("device: cuda:0 {}\n", name);
  else if (gpus <= 1)
    fmt::print("device: cuda:0 ({} ranks sharing it) {}\n", ranks, name);
  else if (gpus == ranks)
    fmt::print("device: cuda:0..cuda:{} ({} GPUs, one per rank) {}\n", gpus - 1, gpus, name);
  else
    fmt::print("device: cuda:0..cuda:{} ({} GPUs shared by {} ranks) {}\n", gpus - 1, gpus, ranks,
               name);
  std::fflush(stdout);
}

// --json: what a run's TrainResult says (fields: command_table.cpp); null report: nothing.
void report_result(Json* report, const JobSpec& job, const TrainResult& r) {
  if (!report) return;
  Json& d = *report;
  d["steps"] = r.steps;
  d["stop_reason"] = r.stop_reason;
  d["stopped_early"] = r.stopped_early;
  d["final_loss"] = r.losses.empty() ? Json(nullptr) : Json(r.losses.back());
  d["train_seconds"] = r.train_seconds;
  d["median_step_seconds"] = r.median_step_seconds;
  d["eval_seconds"] = r.eval_seconds;
  d["samples_per_second"] = r.samples_per_second;
  d["tokens_per_second"] = job.model.kind == "gpt" ? Json(r.tokens_per_second) : Json(nullptr);
  d["eval"] = r.evals.empty() ? Json(nullptr)
                              : Json{{"step", r.final_eval().step},
                                     {"loss", r.final_eval().loss},
                                     {"accuracy", r.final_eval().accuracy},
                                     {"samples", r.final_eval().samples}};
}

// --json: the per-rank memory (measured and planned) and communication time of a sharded run.
void report_ranks(Json* report, const ParallelRunResult& run) {
  if (!report) return;
  Json ranks = Json::array();
  for (const RankReport& rr : run.ranks)
    ranks.push_back(
        Json{{"rank", rr.rank},
             {"params_bytes", rr.memory.current[MemCategory::params]},
             {"grads_bytes", rr.memory.current[MemCategory::grads]},
             {"optimizer_state_bytes", rr.memory.current[MemCategory::optimizer_state]},
             {"planned_params_bytes", rr.plan.steady[MemCategory::params]},
             {"planned_grads_bytes", rr.plan.steady[MemCategory::grads]},
             {"planned_optimizer_state_bytes", rr.plan.steady[MemCategory::optimizer_state]},
             {"peak_bytes", rr.memory.peak_total},
             {"comm_seconds", rr.comm_seconds}});
  (*report)["ranks"] = ranks;
}

// --verify's outcome, recorded for --json; returns the exit status.
int report_verified(Json* report, bool ok) {
  if (report) (*report)["verified"] = ok;
  return ok ? 0 : 1;
}

// Strategy none in this process (on the CPU, the test device or GPU 0). The training setup (its
// data loaded, its model sizes completed, its model built) comes from build_training; the launch
// layer adds the topology the HELLO announces.
int run_in_process(const JobSpec& job, bool quiet, const Args& args, Stopwatch& total,
                   Json* report) {
  const bool cuda = job.device == "cuda";
  // A one-device run's ledger counts its device buffers (they charge the thread's ledger), from
  // the model's parameters on: bound before the model is built.
  MemoryLedger ledger;
  const bool own_ledger = job.device != "cpu";
  const LedgerScope bind(own_ledger ? &ledger : current_ledger());
  TrainingSetup setup = build_training(job);
  launch::use_compute_threads(setup.job);
  const launch::PreparedJob plan = launch::plan_job(setup.job);
  const bool tokens = setup.job.model.kind == "gpt";
  RunTelemetry tel(args, plan, {0}, true);
  print_job_header(setup.job, setup.data.description, setup.model->num_params());
  if (cuda) print_gpu_line(1);
  TrainerCallbacks cb = progress_printer(tokens, quiet);
  add_step_telemetry(cb, tel.sink(0), 0, tokens, own_ledger ? &ledger : nullptr);
  const TrainResult r = launch::with_job_state(tel.sink(0), [&] {
    return cuda ? run_device_training(setup, cb, plan.comm) : run_training(setup, cb);
  });
  print_summary_line(setup.job, r, total.seconds());
  report_result(report, setup.job, r);
  if (report) (*report)["parameters"] = setup.model->num_params();
  tel.close();
  return 0;
}

// The prepared job's ranks as threads of this process; resume_from: "" or a checkpoint.
int run_threads(const launch::PreparedJob& prepared, bool quiet, const Args& args, double tolerance,
                Stopwatch& total, const std::string& resume_from, Json* report) {
  const JobSpec& job = prepared.job;
  std::vector<int> ranks;
  for (int r = 0; r < job.parallel.world_size; ++r) ranks.push_back(r);
  RunTelemetry tel(args, prepared, ranks, true);
  print_job_header(job, prepared.data.description, model_layout(job.model).size());
  if (job.device == "cuda") print_gpu_line(static_cast<int>(job.parallel.world_size));
  RankRunOptions opts;
  opts.callbacks = progress_printer(job.model.kind == "gpt", quiet);
  opts.telemetry = tel.sink_of();
  opts.teaching = tel.teaching();
  opts.on_checkpoint = checkpoint_printer(quiet);
  opts.resume_from = resume_from;
  opts.save_model_path = args.get("--save-model");
  const ParallelRunResult run = launch::run_threads(prepared, opts);
  print_sharded_summary(job, run, total.seconds());
  report_result(report, job, run.result);
  report_ranks(report, run);
  if (report) (*report)["parameters"] = model_layout(job.model).size();
  tel.close();
  if (!args.has("--verify")) return 0;
  return report_verified(report, verify_against_single_process(job, run.result.params, tolerance));
}

// Removes a file when it goes out of scope (the verify model file, whatever happens).
struct RemoveOnExit {
  std::string path;  // "" none
  ~RemoveOnExit() {
    if (path.empty()) return;
    std::error_code ec;
    std::filesystem::remove(path, ec);
    std::filesystem::remove(path + ".tmp", ec);
  }
};

// --hosts or --hostfile (engine/launch/hosts.h); empty: this machine.
launch::HostList hosts_of(const Args& args) {
  SL_ENFORCE_T(UsageError, !(args.has("--hosts") && args.has("--hostfile")),
               "--hosts and --hostfile both name the hosts: give one of them");
  if (args.has("--hosts")) return launch::parse_hosts(args.get("--hosts"));
  if (args.has("--hostfile")) return launch::read_hostfile(args.get("--hostfile"));
  return {};
}

// `prepared`: the job prepared once for every attempt, when it has been (its data read);
// otherwise prepared here only when --verify needs the completed model.
int run_mpi(const JobSpec& job, std::optional<launch::PreparedJob>& prepared,
            const std::string& path, bool quiet, const Args& args, double tolerance,
            const std::string& resume_from, Json* report) {
  launch::MpirunWorkers run;
  run.ranks = static_cast<int>(job.parallel.world_size);
  run.hosts = hosts_of(args);
  // A cluster node may limit virtual memory, under which OpenBLAS started on every core hangs
  // (kernels/cpu/blas_preinit.cpp): the ranks start BLAS on the job's count of threads (1 unless
  // train.threads says otherwise; 0, one per core, is left to OpenBLAS and the worker).
  if (job.train.threads > 0 && std::getenv("OPENBLAS_NUM_THREADS") == nullptr)
    setenv("OPENBLAS_NUM_THREADS", std::to_string(job.train.threads).c_str(), 1);
  if (std::getenv("OPENBLAS_NUM_THREADS") != nullptr) run.forward.push_back("OPENBLAS_NUM_THREADS");
  run.worker.program = launch::this_executable();
  run.worker.job_file = path;
  run.worker.sets = args.all("--set");
  run.worker.quiet = quiet;
  run.worker.resume = resume_from;
  // The workers stream to the collector given; otherwise, unless --no-record, to a collector in
  // this process on loopback that records the run.
  if (args.has("--telemetry") || !job.telemetry.address.empty()) {
    // Checked here, so a bad address or a missing token is one line, not one failure per rank.
    SL_ENFORCE(!args.has("--record"),
               "--record: with --telemetry the collector records an mpi run (shardlab monitor "
               "--record RUN.slrec)");
    std::string host;
    uint16_t port = 0;
    net::parse_host_port(args.get("--telemetry", job.telemetry.address), host, port);
    (void)net::find_token(args.get("--token-file", job.telemetry.token_file));
    // Workers read the job's telemetry section themselves; flags given here override it.
    run.worker.telemetry = args.get("--telemetry");
    run.worker.token_file = args.get("--token-file");
  } else if (!args.has("--no-record")) {
    check_record_path(args);
    run.record_path = args.get("--record", launch::default_recording_path(job));
    run.log = [](const std::string& line) { fmt::print(stderr, "telemetry: {}\n", line); };
  }
  // --http: this process's collector serves the dashboard and records (in place of the one
  // run_mpirun_workers would start); the workers get its token through the environment.
  std::unique_ptr<RunDashboard> dashboard;
  if (const std::optional<HttpAddress> http = http_address(args)) {
    SL_ENFORCE_T(UsageError, run.worker.telemetry.empty(),
                 "--http serves this run's own collector, but the run streams to another one "
                 "(--telemetry or the job's telemetry.address): give --http to that `shardlab "
                 "monitor` instead");
    dashboard = std::make_unique<RunDashboard>(*http, job, run.record_path,
                                               launch::collector_listen_for(run.hosts));
    run.record_path.clear();
    run.worker.telemetry = dashboard->telemetry_address();
    setenv(net::kTokenEnv, dashboard->token().c_str(), 1);
  }
  const bool verify = args.has("--verify");
  // The user's --save-model file serves --verify too; otherwise a temporary one.
  const bool temp_model = verify && !args.has("--save-model");
  run.worker.save_model =
      temp_model ? (std::filesystem::temp_directory_path() /
                    fmt::format("shardlab-verify-{}.slmodel", static_cast<long>(getpid())))
                       .string()
                 : args.get("--save-model");
  const RemoveOnExit cleanup{temp_model ? run.worker.save_model : std::string()};
  launch::MpirunDone done = launch::run_mpirun_workers(run);
  if (dashboard) {
    done.recorded = dashboard->finish();
    done.record_path = dashboard->record_path();
    done.lost_hosts = dashboard->lost_hosts();
    unsetenv(net::kTokenEnv);
  }
  if (!done.record_path.empty())
    fmt::print("telemetry: recorded {} messages to {}\n", done.recorded, done.record_path);
  // A lost host is the failure to name, whatever mpirun's status says about it: the collector's
  // line when this process had one, else mpirun's word on the daemon it lost.
  if (done.lost_hosts.empty() && !done.lost_node.empty() && done.status != 0) {
    const std::vector<int> ranks = run.hosts.ranks_of(done.lost_node, run.ranks);
    std::string list;
    for (int r : ranks) list += (list.empty() ? "" : ", ") + std::to_string(r);
    done.lost_hosts.push_back(fmt::format(
        "host {}{} lost: mpirun lost contact with its daemon there", done.lost_node,
        ranks.empty() ? "" : fmt::format(" ({} {})", ranks.size() == 1 ? "rank" : "ranks", list)));
  }
  if (!done.lost_hosts.empty()) {
    std::string lines;
    for (const std::string& l : done.lost_hosts) lines += (lines.empty() ? "" : "; ") + l;
    SL_THROW(launch::RanksFailed, "{}; the job failed (mpirun exited with status {})", lines,
             done.status);
  }
  SL_ENFORCE(!launch::worker_status_is_final(done.status),
             "mpirun exited with status {}: a rank rejected the job, its data or its checkpoint, "
             "or hit an internal error (its error is printed above; not worth a restart)",
             done.status);
  SL_ENFORCE_T(launch::RanksFailed, done.status == 0,
               "mpirun exited with status {}: a rank failed (its error is printed above)",
               done.status);
  if (!verify) return 0;
  if (!prepared) prepared = launch::prepare_job(job);
  const std::vector<float> params =
      read_model_file(run.worker.save_model, model_layout(prepared->job.model));
  return report_verified(report, verify_against_single_process(job, params, tolerance));
}

// `argv` for attempt `n` of a restarted run: --record PATH becomes PATH.restart-n.EXT, so each
// attempt has its own recording (the default runs/<time>-<job>-<pid>.slrec differs anyway: the
// back-off keeps attempts at least a second apart).
std::vector<std::string> attempt_argv(std::vector<std::string> argv, int n) {
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--record" && i + 1 < argv.size()) {
      argv[i + 1] = attempt_record_path(argv[i + 1], n);
      ++i;
    } else if (argv[i].rfind("--record=", 0) == 0) {
      argv[i] = "--record=" + attempt_record_path(argv[i].substr(9), n);
    }
  }
  return argv;
}

}  // namespace

namespace {

// The run itself; `report`: where --json's figures go (null without --json).
int run_job(const std::vector<std::string>& argv, Json* report) {
  const Args args(argv, arg_spec("run"));
  if (args.positional().size() != 1)
    SL_THROW(UsageError,
             "run needs exactly one job file, e.g. shardlab run resources/jobs/fashion_mlp.json");
  const bool quiet = args.has("--quiet");
  if (args.has("--tolerance") && !args.has("--verify"))
    SL_THROW(UsageError, "--tolerance only applies with --verify");
  // 0: measured on the job (its noise floor), see verify.h.
  const double tolerance = args.has("--tolerance") ? parse_tolerance(args.get("--tolerance")) : 0.0;
  const int max_restarts = static_cast<int>(args.get_int("--max-restarts", 0, 0, 1000));
  Stopwatch total;
  const std::string path = args.positional()[0];
  const JobSpec job = load_job(path, args.all("--set"));
  if (report) {
    Json& d = *report;
    d["job"] = job.name;
    d["model"] = job.model.kind;
    d["strategy"] = job.parallel.strategy;
    d["backend"] = job.parallel.backend;
    d["world_size"] = job.parallel.world_size;
    d["device"] = job.device;
  }
  // Before any data is read or rank started: what the job and its flags ask of the device first,
  // so that it is reported alike on every machine, then whether this process has it.
  require_job_device(job);
  if (max_restarts > 0 && job.train.checkpoint_dir.empty())
    SL_THROW(
        UsageError,
        "--max-restarts: a restart resumes from the job's checkpoints, but train.checkpoint_dir "
        "is not set (add --set train.checkpoint_dir=DIR --set train.checkpoint_every=STEPS)");
  const bool mpi = job.parallel.backend == "mpi";
  if ((args.has("--hosts") || args.has("--hostfile")) && !mpi)
    SL_THROW(UsageError,
             "{} starts ranks on other machines, which needs parallel.backend mpi (add --set "
             "parallel.backend=mpi)",
             args.has("--hosts") ? "--hosts" : "--hostfile");
  if (mpi) (void)hosts_of(args);  // a bad host list is one line before anything starts
  if (args.has("--resume")) {
    // Before starting mpi workers, every shard too: one line here rather than one per rank.
    const std::string line = check_resume(job, args.get("--resume"), mpi);
    if (!quiet && !mpi) fmt::print("{}\n", line);  // (mpi workers print it, rank 0 once)
  }
  if (job.parallel.strategy == "none") {
    if (args.has("--verify"))
      SL_THROW(UsageError,
               "--verify compares a sharded run with one process, but this job's "
               "parallel.strategy is none (try --set parallel.strategy=zero2 --set "
               "parallel.world_size=4)");
    if (args.has("--save-model"))
      SL_THROW(UsageError,
               "--save-model: only a sharded job writes a model file (parallel.strategy ddp, "
               "zero1, zero2 or fsdp)");
    return run_in_process(job, quiet, args, total, report);
  }
  RestartOptions ro;
  ro.max_restarts = max_restarts;
  ro.checkpoint_dir = job.train.checkpoint_dir;
  ro.initial_resume = args.get("--resume");
  // Each attempt's own arguments (its recording) and, from the second on, its resume line.
  auto prepare = [&](int n, const std::string& resume_from) {
    const Args a(attempt_argv(argv, n), arg_spec("run"));
    if (n > 0 && !resume_from.empty() && resume_from != ro.initial_resume) {
      const std::string line = check_resume(job, resume_from, mpi);
      if (!quiet && !mpi) fmt::print("{}\n", line);
    }
    return a;
  };
  if (mpi) {
    std::optional<launch::PreparedJob> prepared;
    if (max_restarts > 0) {
      // What would fail every attempt alike fails once, here: no launcher, unreadable data
      // (the workers read it; a failed worker is only "mpirun exited with status 1" here).
      (void)launch::mpirun_launcher();
      prepared = launch::prepare_job(job);
    }
    return run_with_restarts(ro, [&](int n, const std::string& resume_from) {
      return run_mpi(job, prepared, path, quiet, prepare(n, resume_from), tolerance, resume_from,
                     report);
    });
  }
  // Read once: bad data is not worth a restart.
  const launch::PreparedJob prepared = launch::prepare_job(job);
  return run_with_restarts(ro, [&](int n, const std::string& resume_from) {
    return run_threads(prepared, quiet, prepare(n, resume_from), tolerance, total, resume_from,
                       report);
  });
}

}  // namespace

// --json: the text goes to stderr while the job runs; the summary is one document on stdout.
int run_command(const std::vector<std::string>& argv) {
  const bool json = Args(argv, arg_spec("run")).has("--json");
  StdoutToStderr text_to_stderr(json);
  Stopwatch wall;
  Json report;
  const int status = run_job(argv, json ? &report : nullptr);
  if (!json) return status;
  report["exit_status"] = status;
  report["seconds"] = wall.seconds();
  text_to_stderr.restore();
  print_json(report);
  return status;
}

}  // namespace shardlab::cli
