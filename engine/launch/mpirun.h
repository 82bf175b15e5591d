// Starting ranks under mpirun: the launcher and its argument list, built by one set of rules for
// every caller (`shardlab run` with parallel.backend mpi, and the app's mpirun mode), the exit
// statuses workers and mpirun agree on, and the mpirun mode of `shardlab run`: the workers under
// mpirun in the foreground, a loopback collector recording them (the app runs the same pieces
// through QProcess: gui/run_controller.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/error.h"
#include "engine/launch/hosts.h"
#include "engine/launch/workers.h"

namespace shardlab::launch {

// mpirun exited non-zero: a rank failed or was killed (its own error, if any, is on the ranks'
// stderr). `shardlab run --max-restarts` restarts on it.
class RanksFailed : public Error {
  using Error::Error;
};

// The exit status of a `shardlab worker` that rejected its job, its data or its checkpoint
// (InvalidArgument, FormatError; EX_DATAERR): mpirun passes it on, and `shardlab run` then does
// not restart (2 for a usage error and 70 for an internal error are not restarted either).
inline constexpr int kWorkerBadInputStatus = 65;

// True for the mpirun exit statuses that say a worker rejected its input or hit a bug.
inline bool worker_status_is_final(int status) {
  return status == kWorkerBadInputStatus || status == 2 || status == 70;
}

// The path of the running executable (engine/core/paths.h); IoError when it cannot be read.
std::string this_executable();

// `name` if it contains a '/' and is executable, else the first executable PATH entry of that
// name; "" when there is none.
std::string find_in_path(const std::string& name);

// The launcher: $SHARDLAB_MPIRUN (when set and not empty) or `mpirun`, resolved through PATH.
// Throws IoError naming it when it cannot be found.
std::string mpirun_launcher();

// True when this process runs as root (OpenMPI then needs --allow-run-as-root, and the
// OMPI_ALLOW_RUN_AS_ROOT=1 / OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 environment).
bool running_as_root();

// The whole command line, program first: {launcher, "-np", ranks, ["--allow-run-as-root" when
// root], "--oversubscribe", "--mca", "odls_base_sigkill_timeout", "3", args...}. Throws IoError
// when the launcher cannot be found and InvalidArgument when ranks < 1.
//
// When a rank dies (killed, crashed), OpenMPI 4.1's mpirun ends the job: odls_base_sigkill_timeout
// seconds (default 1) after the death it sends SIGTERM to every other rank, the same time again
// later SIGKILL, and it exits non-zero (137 for a rank killed by SIGKILL). `shardlab worker`
// answers SIGTERM by saying which collective it was in and which rank is gone (a liveness probe
// of up to 1.5 s among the survivors, engine/comm/mpi/liveness.h), then exits; 3 s leaves it time
// to, and the survivors report about 3-5 s after the death. Measured, not chosen: OpenMPI's
// --enable-recovery (MCA orte_enable_recovery) lets the survivors run on to their own timeout,
// but then mpirun exits 0 whatever the ranks do (a "recoverable" job skips errmgr's accounting of
// failed ranks, even of MPI_Abort), and a survivor blocked inside the body of a collective whose
// peer died would wait forever (MPI never completes it). orte_abort_on_non_zero_status only
// concerns ranks that exit non-zero, not ones killed by a signal.
std::vector<std::string> mpirun_argv(int ranks, const std::vector<std::string>& args);

// The environment variables a worker under mpirun needs beyond this process's: the collector's
// token (never on the command line) and, when root, OpenMPI's permission to run as root.
std::vector<std::pair<std::string, std::string>> worker_environment(const std::string& token);

// Runs mpirun_argv(ranks, args), inheriting stdout and stderr, and returns its exit status
// (128 + signal when killed). IoError when the launcher cannot be found or started. A SIGTERM,
// SIGINT or SIGHUP to this process meanwhile is passed on to mpirun as SIGTERM (it ends its
// ranks; after 15 s the run's processes are killed) and the status is 128 + that signal; the
// previous signal actions are restored on return.
//
// `lost_node` (optional): mpirun's stderr then goes through this process (copied to its stderr as
// it comes), and when mpirun says it lost a daemon ("Remote daemon: ... on node h2", Open MPI
// 4.1) the node's name is stored there ("" otherwise).
int run_mpirun(int ranks, const std::vector<std::string>& args, std::string* lost_node = nullptr);

// The node of Open MPI's "Remote daemon: [[J,0],N] on node NAME" line in `text`, or "".
std::string lost_daemon_node(const std::string& text);

struct MpirunWorkers {
  int ranks = 1;
  WorkerCommand worker;  // when recording, its telemetry becomes the loopback collector's address
  std::string record_path;  // "" no collector; else one on loopback records the run here
  std::function<void(const std::string&)> log;  // the collector's connection lines
  // Where the ranks run (hosts.h); empty: this machine. With hosts, the collector listens on this
  // machine's address towards the first host (token required, as always) instead of loopback,
  // and mpirun gets cluster_mpirun_args.
  HostList hosts;
  // Variables every rank gets through mpirun (-x NAME, from this process's environment) besides
  // the collector's token; e.g. OPENBLAS_NUM_THREADS.
  std::vector<std::string> forward;
};

struct MpirunDone {
  int status = 0;         // mpirun's exit status
  uint64_t recorded = 0;  // messages recorded (record_path set)
  std::string record_path;
  // The hosts the collector found lost (net/host_watch.h), "host h2 (ranks 2, 3) lost at ...".
  std::vector<std::string> lost_hosts;
  // The node whose daemon mpirun said it lost ("" none): the only word on a lost host when the
  // workers stream to a collector elsewhere.
  std::string lost_node;
};

// The mpirun mode in the foreground: a RunCollector on 127.0.0.1, or with hosts on this machine's
// address towards them (a fresh token, which reaches the workers through SHARDLAB_TELEMETRY_TOKEN
// in this process's environment while mpirun runs, forwarded with -x) when recording, then the
// workers under run_mpirun.
MpirunDone run_mpirun_workers(const MpirunWorkers& run);

}  // namespace shardlab::launch
