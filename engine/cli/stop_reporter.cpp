#include "engine/cli/stop_reporter.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "engine/comm/mpi/liveness.h"
#include "engine/core/error.h"

namespace shardlab::cli {

namespace {
// The self-pipe from the signal handler to the reporter thread.
int g_stop_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int) {
  const char c = 1;
  [[maybe_unused]] const ssize_t n = write(g_stop_pipe[1], &c, 1);
}

}  // namespace

StopReporter::StopReporter(int rank, int size, std::chrono::milliseconds timeout,
                           std::shared_ptr<FlightRecorder> recorder, std::string flight_dir)
    : rank_(rank),
      size_(size),
      window_(std::min(mpi_detail::liveness_window(timeout), std::chrono::milliseconds(1500))),
      recorder_(std::move(recorder)),
      flight_dir_(std::move(flight_dir)) {
  if (pipe2(g_stop_pipe, O_CLOEXEC) != 0) return;  // no report on SIGTERM; the default action stays
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
  for (int& fd : g_stop_pipe)
    if (fd >= 0) close(fd), fd = -1;
}

void StopReporter::run() {
  pollfd pfd{g_stop_pipe[0], POLLIN, 0};
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
