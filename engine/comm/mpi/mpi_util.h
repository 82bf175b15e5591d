// Internals of the mpi backend shared by its sources (and the backend's tests): the MPI return-code
// check, and the count of operations that can still be inside MPI after their wait gave up
// (defined in mpi_util.cpp). Not part of the public API; include world.h instead.
#pragma once

#include <mpi.h>

#include <chrono>
#include <memory>
#include <string>

#include "engine/comm/communicator.h"

namespace shardlab::mpi_detail {

// Whether MPI_Finalize has run (no MPI call may follow it, MPI_Comm_free included).
bool mpi_finalized();
// MPI_Error_string of `code`, or "MPI error <code>".
std::string error_string(int code);

// Throws CommError "MPI_Xxx failed: <MPI_Error_string>"; `call` is the call's source text.
[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line);

// Operations whose wait timed out and that have not finished since (a collective still running on
// its progress thread, a send that cannot be cancelled, an abandoned progress thread). While this
// is non-zero MpiSession skips MPI_Finalize: Finalize would wait for those calls forever.
int unfinished_operations();
void add_unfinished(int delta);

// Pauses between two MPI_Test polls: a hot spin for the first set_hot_spin() nanoseconds, then
// yields up to 2 ms, then sleeps that grow with the time waited (at most 1/50 of it, so a long
// wait costs little CPU and adds at most ~2% latency).
class Backoff {
 public:
  void pause();

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// The hot spin of Backoff (0 by default). MpiSession sets 50 us when this node has at least one
// core per rank, 0 when it is oversubscribed (a spinning rank would then delay the peer it waits
// for).
void set_hot_spin(std::chrono::nanoseconds spin);

// Wraps `comm` as a Communicator; `gate_comm`, a duplicate of it, carries the arrival gates. Both
// are owned from here on (freed with the communicator, or here if construction fails).
std::unique_ptr<Communicator> adopt(MPI_Comm comm, MPI_Comm gate_comm, std::string name,
                                    CommOptions options);

}  // namespace shardlab::mpi_detail

// Every MPI call goes through this (communicators use MPI_ERRORS_RETURN, so errors come back as
// return codes instead of aborting the job).
#define SL_MPI_CHECK(call)                                                            \
  do {                                                                                \
    const int sl_mpi_rc_ = (call);                                                    \
    if (sl_mpi_rc_ != MPI_SUCCESS)                                                    \
      ::shardlab::mpi_detail::throw_mpi_error(sl_mpi_rc_, #call, __FILE__, __LINE__); \
  } while (0)
