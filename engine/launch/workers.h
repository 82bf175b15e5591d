// The worker processes of a run: the `shardlab worker` command line (one builder for the mpirun
// mode of `shardlab run` and of the app), the command the app shows for remote workers, and where
// a run's files go by default (one naming rule for the command and the app, net/run_paths.h).
#pragma once

#include <string>
#include <vector>

#include "engine/job/job_spec.h"

namespace shardlab::launch {

struct WorkerCommand {
  std::string program;            // the `shardlab` executable
  std::string job_file;           // the job the workers read
  std::vector<std::string> sets;  // --set KEY=VALUE, each
  bool quiet = false;             // --quiet
  std::string resume;             // --resume DIR ("" none)
  std::string telemetry;          // --telemetry HOST:PORT ("" none)
  std::string token_file;         // --token-file FILE ("" none)
  std::string save_model;         // --save-model FILE ("" none)
  bool verify = false;            // --verify (rank 0 compares the model with one process)
};

// {program, "worker", job_file, [--set S]..., [--quiet], [--resume D], [--telemetry A],
// [--token-file F], [--save-model M], [--verify]}: what mpirun starts on every rank.
std::vector<std::string> worker_argv(const WorkerCommand& command);

// The workers as one Slurm job step: {"srun", "--mpi=pmix", "-n", ranks, worker_argv...}. PMIx,
// because OpenMPI 4.1 as Debian builds it joins srun's tasks into one world only through PMIx
// (with --mpi=none or pmi2 every task fails in MPI_Init; engine/comm/mpi/world.h says so in one
// line). InvalidArgument when ranks < 1.
std::vector<std::string> srun_argv(const WorkerCommand& command, int ranks);

// `argv` as one POSIX shell line: each word through shell_quote, separated by spaces.
std::string shell_line(const std::vector<std::string>& argv);

// What to run on a cluster for `world` remote workers: shell_line(srun_argv(command, world)) for
// srun, else "mpirun -np WORLD" followed by the worker's command line, quoted the same way. The
// token travels in command.token_file, never on the line.
std::string remote_command(const WorkerCommand& command, int world, bool srun);

// The host name remote workers should connect to: `given` when set, else the listen host when it
// names one, else this machine's host name; an IPv6 address in brackets.
std::string advertise_host(const std::string& listen_host, const std::string& given);

// One word for a POSIX shell: as is when it is plain, else in single quotes.
std::string shell_quote(const std::string& word);

// runs/<YYYYmmdd-HHMMSS>-<job name>-<pid>.slrec (the folder is $SHARDLAB_RUNS_DIR when set).
std::string default_recording_path(const JobSpec& job);

// A path that does not exist yet: base + suffix, or base-2 + suffix, base-3 + suffix, ...
std::string unused_path(const std::string& base, const std::string& suffix);

// `path` made absolute, its folder created (IoError when it cannot be).
std::string absolute_path_in_new_dir(const std::string& path);

// The run's files when the app does not name them, absolute, in the runs folder:
// <time>-<job>-<pid>.slrec (unique), <job>-<time>.json (unique), <job>.token.
std::string app_recording_path(const JobSpec& job);
std::string app_job_file(const JobSpec& job);
std::string app_token_file(const JobSpec& job);

// Writes the job the workers read to `path`: `job` with its telemetry section cleared (their
// command line says where to stream; a token file named there would win over the one given).
void write_worker_job(const JobSpec& job, const std::string& path);

}  // namespace shardlab::launch
