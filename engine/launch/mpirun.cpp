#include "engine/launch/mpirun.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "engine/core/error.h"
#include "engine/core/paths.h"
#include "engine/launch/process_tree.h"
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

namespace {

// The signal that asked this process to end while mpirun ran (0: none), set by the handler below.
volatile std::sig_atomic_t g_end_signal = 0;
extern "C" void note_end_signal(int sig) {
  g_end_signal = sig;
}

// While alive: SIGTERM, SIGINT and SIGHUP are noted instead of ending this process at once, so
// they can be passed on to mpirun (which ends its ranks); the previous actions come back after.
class ForwardEndSignals {
 public:
  ForwardEndSignals() {
    g_end_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = note_end_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < kSignals.size(); ++i)
      installed_[i] = sigaction(kSignals[i], &sa, &previous_[i]) == 0;
  }
  ~ForwardEndSignals() {
    for (size_t i = 0; i < kSignals.size(); ++i)
      if (installed_[i]) sigaction(kSignals[i], &previous_[i], nullptr);
  }
  ForwardEndSignals(const ForwardEndSignals&) = delete;
  ForwardEndSignals& operator=(const ForwardEndSignals&) = delete;

 private:
  static constexpr std::array<int, 3> kSignals{SIGTERM, SIGINT, SIGHUP};
  std::array<struct sigaction, 3> previous_{};
  std::array<bool, 3> installed_{};
};

}  // namespace

std::string lost_daemon_node(const std::string& text) {
  // Open MPI 4.1's help message: "  Remote daemon: [[62349,0],2] on node h2".
  const std::string key = "Remote daemon:";
  const size_t at = text.find(key);
  if (at == std::string::npos) return "";
  const size_t on = text.find(" on node ", at);
  const size_t eol = text.find('\n', at);
  if (on == std::string::npos || (eol != std::string::npos && on > eol)) return "";
  const size_t start = on + 9;
  size_t end = start;
  while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end]))) ++end;
  return text.substr(start, end - start);
}

namespace {

// Copies mpirun's stderr through to this process's as it comes, keeping the node of a daemon
// mpirun says it lost.
class StderrTap {
 public:
  explicit StderrTap(int fd) : fd_(fd), thread_([this] { pump(); }) {}
  ~StderrTap() {
    if (thread_.joinable()) thread_.join();
    close(fd_);
  }
  StderrTap(const StderrTap&) = delete;
  StderrTap& operator=(const StderrTap&) = delete;
  // After mpirun exited: reads what is left (at most 2 s more: a process mpirun started, such
  // as the ssh to a lost host, may hold the pipe open), then the node, or "".
  std::string lost_node() {
    stop_at_.store(
        std::chrono::steady_clock::now().time_since_epoch().count() +
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::seconds(2))
            .count());
    if (thread_.joinable()) thread_.join();
    return lost_node_;
  }

 private:
  void pump() {
    std::string tail;  // the last few lines, enough for the help message's line
    std::array<char, 4096> buf{};
    for (;;) {
      const auto stop = stop_at_.load();
      if (stop != 0 && std::chrono::steady_clock::now().time_since_epoch().count() >= stop) break;
      pollfd p{fd_, POLLIN, 0};
      const int ready = poll(&p, 1, 100);
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) continue;
      const ssize_t n = read(fd_, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      for (ssize_t done = 0; done < n;) {
        const ssize_t w = write(STDERR_FILENO, buf.data() + done, static_cast<size_t>(n - done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += w;
      }
      tail.append(buf.data(), static_cast<size_t>(n));
      if (lost_node_.empty()) lost_node_ = lost_daemon_node(tail);
      if (tail.size() > 8192) tail.erase(0, tail.size() - 1024);
    }
  }
  int fd_;
  std::string lost_node_;
  std::atomic<std::chrono::steady_clock::rep> stop_at_{0};  // 0: read until the pipe ends
  std::thread thread_;
};

}  // namespace

int run_mpirun(int ranks, const std::vector<std::string>& args, std::string* lost_node) {
  std::vector<std::string> argv = mpirun_argv(ranks, args);
  const std::string launcher = argv.front();
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  // A SIGTERM to this process alone (a job scheduler, a test, `kill`) must not leave mpirun and
  // its ranks running without it: it is passed on, and mpirun ends its ranks.
  const ForwardEndSignals forward;
  // mpirun's stderr through a pipe, read on a thread, when the caller wants the lost node.
  int pipe_fds[2] = {-1, -1};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (lost_node != nullptr && pipe2(pipe_fds, O_CLOEXEC) == 0) {
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  } else {
    pipe_fds[0] = pipe_fds[1] = -1;
  }
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, launcher.c_str(), &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (pipe_fds[1] >= 0) close(pipe_fds[1]);
  if (rc != 0 && pipe_fds[0] >= 0) close(pipe_fds[0]);
  SL_ENFORCE_T(IoError, rc == 0, "cannot start {}: {}", launcher, std::strerror(rc));
  std::optional<StderrTap> tap;
  if (pipe_fds[0] >= 0) tap.emplace(pipe_fds[0]);
  int status = 0;
  int forwarded = 0;
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    SL_ENFORCE_T(IoError, r == 0 || errno == EINTR, "waiting for {} failed: {}", launcher,
                 std::strerror(errno));
    if (const int sig = g_end_signal; sig != 0 && forwarded == 0) {
      forwarded = sig;
      ::kill(pid, SIGTERM);
      // mpirun ends its ranks within odls_base_sigkill_timeout; if it is stuck, the run's
      // processes are killed outright.
      kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    }
    if (kill_at && std::chrono::steady_clock::now() >= *kill_at) {
      kill_run_processes(pid, "");
      ::kill(pid, SIGKILL);
      kill_at.reset();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (tap) *lost_node = tap->lost_node();
  if (forwarded != 0) return 128 + forwarded;
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
    co.listen = collector_listen_for(run.hosts);
    collector = std::make_unique<RunCollector>(co);
    setenv(net::kTokenEnv, collector->token().c_str(), 1);
    worker.telemetry =
        host_port(run.hosts.empty() ? "127.0.0.1" : collector->host(), collector->port());
  }
  std::vector<std::string> forward = run.forward;
  if (std::getenv(net::kTokenEnv) != nullptr) forward.push_back(net::kTokenEnv);
  std::vector<std::string> args = cluster_mpirun_args(run.hosts, run.ranks, forward);
  const std::vector<std::string> worker_args = worker_argv(worker);
  args.insert(args.end(), worker_args.begin(), worker_args.end());
  done.status = run_mpirun(run.ranks, args, &done.lost_node);
  if (collector) {
    done.recorded = collector->finish();
    done.record_path = collector->record_path();
    done.lost_hosts = collector->lost_hosts();
    unsetenv(net::kTokenEnv);
  }
  return done;
}

}  // namespace shardlab::launch
