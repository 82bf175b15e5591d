// Starting ranks under mpirun: the launcher and its argument list, built by one set of rules for
// every caller (`shardlab run` with parallel.backend mpi, and the app's mpirun mode).
#pragma once

#include <string>
#include <vector>

namespace shardlab::launch {

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

}  // namespace shardlab::launch
