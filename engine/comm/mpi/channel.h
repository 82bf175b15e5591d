// The Channel of the mpi backend: one MPI communicator (plus its gate twin), the queue of its
// collectives in issue order, and the progress thread; and the Op, one queued collective (or
// split) as the channel, its Work handle and the MPI call see it. Internal to engine/comm/mpi:
// channel.cpp implements the Channel, collectives.cpp, point_to_point.cpp and communicator.cpp
// build Ops and hand them to it.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/mpi/communicator.h"
#include "engine/comm/mpi/gate.h"
#include "engine/comm/mpi/mpi_util.h"

namespace shardlab::mpi_detail {

// One collective (or split), shared by its Work handle, the channel and whoever runs it.
struct Op {
  CommRecord record;
  std::string what;  // "all_reduce on group world (seq 3)", for messages
  bool has_record = true;
  Signature sig;
  std::function<void(Op&)> body;  // the blocking MPI call(s), run once the gate has opened
  Clock::time_point queued_at;

  // The caller's buffers, which the body reads and writes through these spans; detach() points
  // them at private copies.
  std::span<float> data;  // in and out (all_reduce, broadcast)
  std::span<const float> input;
  std::span<float> output;

  // The runner's (one thread at a time: the holder of Channel::busy_).
  Gate gate;
  bool gate_started = false;
  Clock::time_point arrived;  // when this rank entered the gate
  bool broke = false;  // failed in a way that leaves the communicator unusable

  // Channel::mu_.
  bool handed_off = false;  // a caller's deadline passed in the gate; the progress thread goes on
  bool timed_out = false;   // a waiter gave up on it (counted in g_unfinished until it finishes)
  bool in_body = false;     // every rank has arrived: it runs to completion, no timeout applies
  std::vector<float> own_data, own_input, own_output;

  std::atomic<bool> finished{false};   // set after `error`
  std::atomic<bool> abandoned{false};  // the communicator was destroyed first
  std::exception_ptr error;
  std::atomic<bool> claimed{false};  // the one emission of the record has been taken
  // The communicator failed before this operation got under way: it still runs, for the peers'
  // sake, but on private copies, so that nothing writes the caller's memory after its wait threw.
  std::atomic<bool> detached{false};

  bool claim() { return !claimed.exchange(true); }
  void detach() {  // Channel::mu_ held, !in_body
    own_data.assign(data.begin(), data.end());
    own_input.assign(input.begin(), input.end());
    own_output.assign(output.size(), 0.0f);
    data = own_data;
    input = own_input;
    output = own_output;
    detached.store(true);
  }
  bool settled() const { return finished.load(std::memory_order_acquire) || abandoned.load(); }
};

// An MPI communicator (plus a twin for the gates), the queue of its collectives in issue order,
// and the progress thread that runs queued collectives nobody is waiting for. One thread at a
// time runs the queue (busy_): a caller in wait() when the queue is free, else the progress
// thread.
class Channel : public std::enable_shared_from_this<Channel> {
 public:
  // Takes ownership of both communicators.
  Channel(MPI_Comm comm, MPI_Comm gate_comm) : comm_(comm), gate_comm_(gate_comm) {
    try {
      for (MPI_Comm c : {comm_, gate_comm_})
        SL_MPI_CHECK(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
      SL_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
      SL_MPI_CHECK(MPI_Comm_size(comm_, &size_));
      void* attr = nullptr;
      int flag = 0;
      SL_MPI_CHECK(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &attr, &flag));
      tag_ub_ = flag ? *static_cast<int*>(attr) : 32767;  // the least MPI guarantees
    } catch (...) {
      free_comms();
      throw;
    }
  }
  ~Channel() {
    if (!started_) free_comms();  // else the progress thread frees them when it ends
  }
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int tag_ub() const { return tag_ub_; }
  MPI_Comm comm() const { return comm_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  void start(const MpiCommunicator* owner) {
    owner_ = owner;
    timeout_ = owner->options().timeout;
    started_ = true;
    worker_ = std::thread([self = shared_from_this()] { self->run(); });
  }

  // Queues `op` behind everything queued before; throws CommError if the communicator is broken.
  WorkHandle submit(std::shared_ptr<Op> op);
  // Returns once `op` has finished or failed; runs the queue on this thread when no one else is.
  // Throws TimeoutError at `deadline` unless the collective itself is under way (see header).
  void wait(Op& op, Clock::time_point deadline);
  // For a handle dropped before its operation finished: the operation still runs (the peers need
  // it) but on private copies, so the caller may free its buffers; if its transfer is already
  // under way (every rank has arrived) it is waited for instead.
  void release(Op& op);
  // Throws CommError (after a failed record) if an earlier failure made the communicator unusable.
  void ensure_usable(Op& op);
  std::string why_broken() {
    std::lock_guard lock(mu_);
    return broken_;
  }
  void mark_broken(const std::string& why) {
    std::lock_guard lock(mu_);
    if (broken_.empty()) broken_ = why;
  }
  // Hands the record to the sink, unless the communicator is gone. Only after op.claim().
  void report(Op& op, bool ok) {
    if (!op.has_record) return;
    std::lock_guard lock(owner_mu_);
    if (owner_) owner_->report(op.record, ok);
  }
  // report(op, false) for a failure with a known error (Communicator::report_failure): returns
  // the error to throw, which may now say where the flight record went.
  std::exception_ptr report_failure(Op& op, std::exception_ptr error) {
    if (!op.has_record) return error;
    std::lock_guard lock(owner_mu_);
    return owner_ ? owner_->report_failure(op.record, std::move(error)) : error;
  }
  // Waits (up to the timeout) for the queue to drain, then stops the thread; abandons what is
  // stuck.
  void shutdown();

 private:
  enum class Outcome { Done, TimedOut, Abandoned };
  // Gate, then body; records the result in `op`. No lock held. `deadline` is null on the
  // progress thread, which instead gives up when the communicator is abandoned.
  Outcome execute(Op& op, const Clock::time_point* deadline);
  void publish(Op& op);  // mu_ held: the front op has finished
  [[noreturn]] void reject(Op& op, const std::string& why);
  void time_out(std::unique_lock<std::mutex>& lock, Op& op, const Op* blocking);
  void run();
  void free_comms() {
    if (mpi_finalized()) return;
    for (MPI_Comm* c : {&comm_, &gate_comm_})
      if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  }

  MPI_Comm comm_, gate_comm_;
  int rank_ = 0, size_ = 1, tag_ub_ = 32767;
  std::chrono::milliseconds timeout_{60000};
  bool started_ = false;
  std::thread worker_;

  std::mutex mu_;
  std::condition_variable worker_cv_;      // the progress thread waits here
  std::condition_variable waiter_cv_;      // callers (and shutdown) wait here
  std::deque<std::shared_ptr<Op>> queue_;  // not finished yet; the front runs next
  bool busy_ = false;                      // someone is running the queue
  bool worker_idle_ = false;               // the progress thread waits without a deadline
  Clock::time_point last_submit_;
  bool worker_done_ = false;
  bool stopping_ = false;
  std::atomic<bool> abandon_{false};
  std::string broken_;  // why the communicator is unusable; empty while it is fine

  std::mutex owner_mu_;
  const MpiCommunicator* owner_ = nullptr;
};

// A fresh Op for `record` (collectives.cpp, point_to_point.cpp).
inline std::shared_ptr<Op> new_op(const CommRecord& record, std::string what) {
  auto op = std::make_shared<Op>();
  op->record = record;
  op->what = std::move(what);
  return op;
}

// MPI counts and displacements are ints.
inline int mpi_count(size_t n, const Op& op) {
  SL_ENFORCE(n <= static_cast<size_t>(INT_MAX),
             "{}: {} elements are more than MPI's int counts can address ({}); split the buffer",
             op.what, n, INT_MAX);
  return static_cast<int>(n);
}

}  // namespace shardlab::mpi_detail
