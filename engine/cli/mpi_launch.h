// Starting `shardlab worker` under mpirun from `shardlab run` (backend mpi).
#pragma once

#include <string>
#include <vector>

#include "engine/core/error.h"

namespace shardlab::cli {

// mpirun exited non-zero: a rank failed or was killed (its own error, if any, is on the ranks'
// stderr; the launcher cannot tell which kind). `shardlab run --max-restarts` restarts on it.
class RanksFailed : public Error {
  using Error::Error;
};

// The path of the running executable (engine/core/paths.h); IoError when it cannot be read.
std::string self_executable();

// Runs `mpirun -np ranks [--allow-run-as-root when root] --oversubscribe <args...>`, inheriting
// stdout and stderr, and returns its exit status (128 + signal when killed). The launcher is
// $SHARDLAB_MPIRUN or `mpirun` from PATH; IoError when it cannot be found or started.
int run_mpirun(int ranks, const std::vector<std::string>& args);

}  // namespace shardlab::cli
