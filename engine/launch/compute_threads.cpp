#include "engine/launch/compute_threads.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "kernels/cpu/gemm.h"

namespace shardlab::launch {

namespace {

// A positive integer from the environment, or 0.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return 0;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return end && *end == '\0' && n > 0 && n < 1 << 20 ? static_cast<int>(n) : 0;
}

}  // namespace

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

int ranks_on_this_node(const JobSpec& job) {
  const auto& p = job.parallel;
  if (p.strategy == "none" || p.world_size <= 1) return 1;
  if (p.backend != "mpi") return static_cast<int>(p.world_size);
  if (const int local = env_int("OMPI_COMM_WORLD_LOCAL_SIZE")) return local;
  if (const int per_node = env_int("SLURM_NTASKS_PER_NODE")) return per_node;
  return 1;
}

int compute_threads(const JobSpec& job, int ranks_here) {
  if (job.train.threads > 0) return static_cast<int>(job.train.threads);
  return std::max(1, usable_cores() / std::max(1, ranks_here));
}

int use_compute_threads(const JobSpec& job) {
  const int n = compute_threads(job, ranks_on_this_node(job));
  kernels::set_blas_threads(n);
  return n;
}

}  // namespace shardlab::launch
