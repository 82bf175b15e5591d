// StopReporter: what a `shardlab worker` rank says when mpirun ends the job under it.
//
// When one rank dies, mpirun sends SIGTERM to every other rank and SIGKILL
// odls_base_sigkill_timeout (3 s, see engine/launch/mpirun.h) later. On SIGTERM the reporter (a
// thread woken through a self-pipe by the signal handler) prints one line saying which collective
// this rank was in and which ranks are gone (a liveness probe of up to 1.5 s: the survivors are
// signalled together, so they answer each other), writes the flight record when it has a folder
// for one, and ends the process at once with 143 (128 + SIGTERM). The rank's threads may be stuck
// inside a blocking MPI call that a dead peer will never complete, so this is the one place
// outside main() that ends the process: nothing else can, and MPI_Finalize must not run.
// std::_Exit runs no destructors, atexit handlers or stdio flushes beyond the reporter's own:
// telemetry this rank had buffered but not yet sent is lost (a --record file then lacks this
// rank's last events and final state), and a RecordingWriter in this process leaves its file cut
// at the last whole block written (up to a second of messages missing, no final flush).
// CLI only; needs MPI. One per process, for the lifetime of the rank's world.
#pragma once

#include <signal.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "engine/comm/flight_recorder.h"

namespace shardlab::cli {

class StopReporter {
 public:
  // `timeout` is the job's communication timeout (the probe window is derived from it, at most
  // 1.5 s); `flight_dir` "" writes no flight record.
  StopReporter(int rank, int size, std::chrono::milliseconds timeout,
               std::shared_ptr<FlightRecorder> recorder, std::string flight_dir);
  // Restores the previous SIGTERM action and stops the thread.
  ~StopReporter();
  StopReporter(const StopReporter&) = delete;
  StopReporter& operator=(const StopReporter&) = delete;

 private:
  void run();
  [[noreturn]] void report_and_end();

  int rank_, size_;
  std::chrono::milliseconds window_;
  std::shared_ptr<FlightRecorder> recorder_;
  std::string flight_dir_;
  std::atomic<bool> stop_{false};
  bool installed_ = false;
  struct sigaction previous_ {};
  std::thread thread_;
};

}  // namespace shardlab::cli
