// Ending a run's processes: mpirun, what it started, and the workers that outlived it. mpirun
// runs in its own process group; its ranks may not (OpenMPI's daemons start them in groups of
// their own), and a worker whose mpirun is gone is re-parented to init. So the run's processes
// are found in /proc: the descendants of mpirun and every `shardlab worker` of the run's job file.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace shardlab::launch {

// Every process below `root` (children, grandchildren, ...), from /proc.
std::vector<pid_t> descendants(pid_t root);

// The `shardlab worker` processes (other than this one) whose command line names `job_file`
// (none when it is empty), from /proc.
std::vector<pid_t> workers_of(const std::string& job_file);

// SIGKILL to the process group `group` (mpirun's, started with setpgid), to every descendant of
// it and to every worker of `job_file`, found before the first signal is sent. No-op for
// group <= 0.
void kill_run_processes(pid_t group, const std::string& job_file);

}  // namespace shardlab::launch
