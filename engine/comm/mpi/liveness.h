// Naming the rank that is gone. When a collective of the mpi backend times out, or mpirun ends the
// job because a rank died, MPI itself cannot say which rank is missing. A liveness probe can: on a
// private duplicate of the world communicator every rank sends a small token to every other and
// waits a bounded window for one from each. The survivors of a failure reach the probe at nearly
// the same moment (they time out together, or mpirun signals them together), so they answer each
// other; a rank that sends nothing in the window is dead, or stuck outside communication. A rank
// counts as alive only by answering this probe: each probe has its own generation number, every
// probing rank echoes the requests it receives, and an echo of an earlier generation (a rank that
// answered a probe before and may have died since) is not an answer.
//
// Also here: the board of what each communicator of this process is doing right now (the
// collective a rank was in when it was stopped).
//
// Process-wide state, like MPI itself: one world per process (make_mpi_world installs the probe's
// communicator; a later world replaces it). Internal to the mpi backend and the worker.
#pragma once

#include <mpi.h>

#include <chrono>
#include <string>

namespace shardlab::mpi_detail {

// Takes ownership of `comm` (a duplicate of the world, from make_mpi_world) as the probe's
// communicator; frees the previous one.
void install_liveness_comm(MPI_Comm comm);

// Runs the probe for up to `window` (never longer; what did not complete is cancelled or left
// to MPI) and says what it found, in ranks of the world, e.g. "world rank 2 did not answer a
// liveness probe within 5 s (dead, or stuck outside communication)" or "every world rank answered
// a liveness probe within 5 s (none is dead: look for one that is late or never issued this
// operation)". Thread-safe: a caller that arrives while another thread's probe runs (a timeout
// and mpirun's SIGTERM at the same moment) gets that probe's verdict, or what it has seen once it
// has run `window`, without a second round. "" when no probe communicator is installed (no
// world), MPI is finalized, or the world has one rank. A peer is only seen if it probes too during
// this window (it echoes this probe's request); a peer whose probe overlaps this one is answered
// in turn, so this probe runs until every peer has echoed, or `window`.
std::string probe_liveness(std::chrono::milliseconds window);

// The window for a communicator whose timeout is `timeout`: min(timeout, 5 s).
std::chrono::milliseconds liveness_window(std::chrono::milliseconds timeout);

// The in-flight board: enter() when an operation starts on this rank (its gate, then its body),
// leave() when it has finished; `key` identifies the entry (the operation's address).
void enter_operation(const void* key, const std::string& what);
void leave_operation(const void* key);
// What is in flight now, oldest first, joined by "; " ("" when nothing is).
std::string operations_in_flight();

// RAII for the board.
class InFlight {
 public:
  InFlight(const void* key, const std::string& what) : key_(key) { enter_operation(key, what); }
  ~InFlight() { leave_operation(key_); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  const void* key_;
};

}  // namespace shardlab::mpi_detail
