#include "engine/launch/mpirun.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "engine/core/error.h"
#include "engine/core/paths.h"
#include "engine/launch/run_collector.h"
#include "net/auth.h"

extern char** environ;

namespace shardlab::launch {

std::string this_executable() {
  std::string path = shardlab::self_executable();
  SL_ENFORCE_T(IoError, !path.empty(), "cannot find this program's path (/proc/self/exe)");
  return path;
}

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

std::vector<std::pair<std::string, std::string>> worker_environment(const std::string& token) {
  std::vector<std::pair<std::string, std::string>> env{{net::kTokenEnv, token}};
  if (running_as_root()) {
    env.emplace_back("OMPI_ALLOW_RUN_AS_ROOT", "1");
    env.emplace_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
  }
  return env;
}

int run_mpirun(int ranks, const std::vector<std::string>& args) {
  std::vector<std::string> argv = mpirun_argv(ranks, args);
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

MpirunDone run_mpirun_workers(const MpirunWorkers& run) {
  MpirunDone done;
  WorkerCommand worker = run.worker;
  std::unique_ptr<RunCollector> collector;
  if (!run.record_path.empty()) {
    CollectorRunOptions co;
    co.record_path = run.record_path;
    co.log = run.log;
    collector = std::make_unique<RunCollector>(co);
    setenv(net::kTokenEnv, collector->token().c_str(), 1);
    worker.telemetry = "127.0.0.1:" + std::to_string(collector->port());
  }
  done.status = run_mpirun(run.ranks, worker_argv(worker));
  if (collector) {
    done.recorded = collector->finish();
    done.record_path = collector->record_path();
    unsetenv(net::kTokenEnv);
  }
  return done;
}

}  // namespace shardlab::launch
