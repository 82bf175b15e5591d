#include "engine/cli/mpi_launch.h"

#include <sys/wait.h>
#include <unistd.h>

#include <spawn.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "engine/core/error.h"
#include "engine/core/paths.h"
#include "engine/launch/mpirun.h"

extern char** environ;

namespace shardlab::cli {

std::string self_executable() {
  std::string path = shardlab::self_executable();
  SL_ENFORCE_T(IoError, !path.empty(), "cannot find this program's path (/proc/self/exe)");
  return path;
}

int run_mpirun(int ranks, const std::vector<std::string>& args) {
  std::vector<std::string> argv = launch::mpirun_argv(ranks, args);
  const std::string launcher = argv.front();
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
