#include "engine/cli/mpi_launch.h"

#include <sys/wait.h>
#include <unistd.h>

#include <spawn.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "engine/core/error.h"

extern char** environ;

namespace shardlab::cli {

namespace {

std::string find_in_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/bin:/bin";
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

}  // namespace

std::string self_executable() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  SL_ENFORCE_T(IoError, !ec, "cannot find this program's path (/proc/self/exe): {}", ec.message());
  return p.string();
}

int run_mpirun(int ranks, const std::vector<std::string>& args) {
  const char* env = std::getenv("SHARDLAB_MPIRUN");
  const std::string launcher = find_in_path(env && *env ? env : "mpirun");
  SL_ENFORCE_T(IoError, !launcher.empty(),
               "parallel.backend mpi: cannot find {} (install openmpi-bin, or set "
               "SHARDLAB_MPIRUN to the launcher)",
               env && *env ? env : "mpirun");
  std::vector<std::string> argv{launcher, "-np", std::to_string(ranks)};
  if (geteuid() == 0) argv.push_back("--allow-run-as-root");
  argv.push_back("--oversubscribe");
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, launcher.c_str(), nullptr, nullptr, cargv.data(), environ);
  SL_ENFORCE_T(IoError, rc == 0, "cannot start {}: {}", launcher, std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    SL_ENFORCE_T(IoError, errno == EINTR, "waiting for {} failed: {}", launcher,
                 std::strerror(errno));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace shardlab::cli
