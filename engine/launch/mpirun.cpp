#include "engine/launch/mpirun.h"

#include <unistd.h>

#include <cstdlib>

#include "engine/core/error.h"

namespace shardlab::launch {

std::string find_in_path(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  const std::string p = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    const size_t end = p.find(':', start);
    const std::string dir =
        p.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const std::string full = (dir.empty() ? "." : dir) + "/" + name;
    if (access(full.c_str(), X_OK) == 0) return full;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return "";
}

std::string mpirun_launcher() {
  const char* env = std::getenv("SHARDLAB_MPIRUN");
  const std::string name = env && *env ? env : "mpirun";
  const std::string launcher = find_in_path(name);
  SL_ENFORCE_T(IoError, !launcher.empty(),
               "parallel.backend mpi: cannot find {} (install openmpi-bin, or set "
               "SHARDLAB_MPIRUN to the launcher)",
               name);
  return launcher;
}

bool running_as_root() {
  return geteuid() == 0;
}

std::vector<std::string> mpirun_argv(int ranks, const std::vector<std::string>& args) {
  SL_ENFORCE(ranks >= 1, "mpirun needs at least one rank, got {}", ranks);
  std::vector<std::string> argv{mpirun_launcher(), "-np", std::to_string(ranks)};
  if (running_as_root()) argv.push_back("--allow-run-as-root");
  argv.push_back("--oversubscribe");
  // Time for the other ranks to report a dead one before mpirun kills them (see mpirun.h).
  for (const char* a : {"--mca", "odls_base_sigkill_timeout", "3"}) argv.push_back(a);
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace shardlab::launch
