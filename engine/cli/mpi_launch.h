// Starting `shardlab worker` under mpirun from `shardlab run` (backend mpi).
#pragma once

#include <string>
#include <vector>

#include "engine/core/error.h"

namespace shardlab::cli {

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
std::string self_executable();

// Runs `mpirun -np ranks [--allow-run-as-root when root] --oversubscribe <args...>`, inheriting
// stdout and stderr, and returns its exit status (128 + signal when killed). The launcher is
// $SHARDLAB_MPIRUN or `mpirun` from PATH; IoError when it cannot be found or started.
int run_mpirun(int ranks, const std::vector<std::string>& args);

}  // namespace shardlab::cli
