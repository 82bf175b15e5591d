#include "engine/cli/stop_reporter.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "engine/comm/mpi/liveness.h"
#include "engine/core/error.h"

namespace shardlab::cli {

namespace {
// The self-pipe from the signal handler to the reporter thread. Atomic (and lock-free, so usable
// from a signal handler): the handler may run on any thread while the destructor closes them.
std::atomic<int> g_stop_read{-1};
std::atomic<int> g_stop_write{-1};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_stop_signal(int) {
  const int saved = errno;  // the interrupted code may be about to read it
  const int fd = g_stop_write.load();
  if (fd >= 0) {
    const char c = 1;
    // Non-blocking: a full pipe already holds a wake-up, and the handler must never block.
    [[maybe_unused]] const ssize_t n = write(fd, &c, 1);
  }
  errno = saved;
}

}  // namespace

StopReporter::StopReporter(int rank, int size, std::chrono::milliseconds timeout,
                           std::shared_ptr<FlightRecorder> recorder, std::string flight_dir)
    : rank_(rank),
      size_(size),
      window_(std::min(mpi_detail::liveness_window(timeout), std::chrono::milliseconds(1500))),
      recorder_(std::move(recorder)),
      flight_dir_(std::move(flight_dir)) {
  int fds[2] = {-1, -1};
  // No report on SIGTERM when there is no pipe: the default action stays.
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return;
  g_stop_read = fds[0];
  g_stop_write = fds[1];
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  installed_ = sigaction(SIGTERM, &sa, &previous_) == 0;
  thread_ = std::thread([this] { run(); });
}

StopReporter::~StopReporter() {
  if (installed_) sigaction(SIGTERM, &previous_, nullptr);
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  // The write end first: a handler still running on another thread sees -1, or writes to a pipe
  // that is still open.
  const int w = g_stop_write.exchange(-1);
  if (w >= 0) close(w);
  const int r = g_stop_read.exchange(-1);
  if (r >= 0) close(r);
}

void StopReporter::run() {
  pollfd pfd{g_stop_read.load(), POLLIN, 0};
  while (!stop_.load()) {
    if (poll(&pfd, 1, 200) <= 0 || !(pfd.revents & POLLIN)) continue;
    report_and_end();
  }
}

void StopReporter::report_and_end() {
  const std::string in = mpi_detail::operations_in_flight();
  const std::string alive = mpi_detail::probe_liveness(window_);
  std::string msg =
      fmt::format("rank {} of {} stopped by mpirun (SIGTERM) {}: {}", rank_, size_,
                  in.empty() ? std::string("outside communication") : "while in " + in,
                  alive.empty() ? std::string("no liveness probe could run") : alive);
  if (recorder_ && !flight_dir_.empty()) {
    try {
      msg += fmt::format("; flight record (last {} operations of rank {}) written to {}",
                         std::min(recorder_->capacity(), recorder_->total()), rank_,
                         recorder_->dump(flight_dir_));
    } catch (const Error& e) {
      msg += fmt::format("; the flight record could not be written: {}", e.what());
    }
  }
  std::fflush(stdout);
  std::fprintf(stderr, "shardlab: error: %s\n", msg.c_str());
  std::fflush(stderr);
  std::_Exit(128 + SIGTERM);
}

}  // namespace shardlab::cli
