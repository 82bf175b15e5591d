#include "engine/launch/run_mode.h"

#include <fmt/format.h>

namespace shardlab::launch {

std::string mode_problem(const JobSpec& job, RunMode mode) {
  if (const auto problems = validate(job); !problems.empty()) return problems.front().to_string();
  if (job.parallel.strategy == "none")
    return "The app runs sharded jobs only (parallel.strategy \"none\" is not supported yet)";
  const char* needed = mode == RunMode::threads ? "threads" : "mpi";
  if (job.parallel.backend == needed) return "";
  const char* name = mode == RunMode::threads  ? "threads"
                     : mode == RunMode::mpirun ? "mpirun"
                                               : "remote";
  return fmt::format(
      "The {} mode runs jobs with parallel.backend \"{}\", but this job's parallel.backend is "
      "\"{}\"",
      name, needed, job.parallel.backend);
}

}  // namespace shardlab::launch
