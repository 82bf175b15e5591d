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
// root], "--oversubscribe", args...}. Throws IoError when the launcher cannot be found and
// InvalidArgument when ranks < 1.
std::vector<std::string> mpirun_argv(int ranks, const std::vector<std::string>& args);

}  // namespace shardlab::launch
