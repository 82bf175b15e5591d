// The ways the app runs a job (gui/RunController): its ranks as threads of this process, as
// workers under a local mpirun streaming to a loopback collector, or as remote workers that the
// user starts on a cluster and that stream to a collector listening for them.
#pragma once

#include <string>

#include "engine/job/job_spec.h"

namespace shardlab::launch {

enum class RunMode { threads, mpirun, remote };

// Why `job` cannot run in `mode`, or "" when it can: the job must be valid (its first problem),
// sharded, and its parallel.backend must match the mode (threads: "threads"; mpirun and remote:
// "mpi").
std::string mode_problem(const JobSpec& job, RunMode mode);

}  // namespace shardlab::launch
