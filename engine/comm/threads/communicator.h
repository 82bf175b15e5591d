// The threads backend: ranks are threads of one process and exchange data through shared memory.
// Create communicators with run_threads() or make_thread_world() (world.h); split() makes more.
//
// How an operation runs. Each rank queues its collectives in issue order; they are executed one
// at a time, in that order, either by the rank's progress thread (so *_async overlaps with the
// caller's compute) or by the caller itself when it waits for an operation nobody has started yet
// (so a blocking call pays no thread hand-off). A collective publishes this rank's buffer pointers
// and call description in the group's shared state, meets the other ranks, checks that every rank
// made the same call, and then each rank reduces or copies its own chunk directly between the
// ranks' buffers; a final meeting keeps the buffers alive until every peer is done with them.
// Reductions add the ranks in rank order, so results are bit-identical on every rank and run.
//
// Point to point bypasses the queue, so it is not ordered with collectives (as in MPI): a send is
// eager (copied into the receiver's mailbox when issued, complete at once), and a receive takes
// its message in wait() or done(). Both match per (peer, tag) in issue order.
//
// Failures. A collective waits at most options().timeout for its peers to enter it (once all have
// entered, its later meetings wait only for the peers' copies); a timeout names the ranks that
// had not arrived and leaves the group failed (its ranks are out of step), so later operations on
// it, and those queued behind, throw CommError at once. A receive waits at most the timeout from
// its wait(). Work::wait() returns when the operation has completed or failed. Calls that
// disagree across ranks throw CommError on every rank and leave the group usable. Destroying the
// handle of a pending collective takes it off the queue, or ends it if it is running (either way
// failing the group, whose ranks are out of step) and waits until it no longer touches the
// buffers; destroying a pending receive's handle cancels it.
//
// Buffers: all_reduce and broadcast are in place by definition; reduce_scatter's and all_gather's
// input and output must not overlap (the base rejects that with InvalidArgument).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"

namespace shardlab {

namespace threads_detail {  // group.h
class Group;
struct Published;
struct CallDesc;
}  // namespace threads_detail

class ThreadsCommunicator final : public Communicator {
 public:
  // Rank `rank` of `group` (see world.h for making groups).
  ThreadsCommunicator(std::shared_ptr<threads_detail::Group> group, int rank, std::string name,
                      CommOptions options);
  // Waits for the operation in flight, if any, after failing the group so that it ends promptly;
  // queued operations fail with CommError. With nothing in flight, peers that later wait for
  // this rank fail at once instead of timing out (unless destroyed by an exception unwinding,
  // which run_threads reports to the peers itself).
  ~ThreadsCommunicator() override;

  const char* backend() const override { return "threads"; }

  // Fails this group and every group split from it: operations blocked in, or later entering, any
  // of them throw CommError with `reason` (e.g. "rank 1 of group world failed: boom").
  void abort(const std::string& reason);

 protected:
  WorkHandle do_all_reduce(std::span<float> data, const Call& call) override;
  WorkHandle do_reduce_scatter(std::span<const float> input, std::span<float> output,
                               const Call& call) override;
  WorkHandle do_all_gather(std::span<const float> input, std::span<float> output,
                           const Call& call) override;
  WorkHandle do_broadcast(std::span<float> data, const Call& call) override;
  WorkHandle do_barrier(const Call& call) override;
  WorkHandle do_send(std::span<const float> data, const Call& call) override;
  WorkHandle do_recv(std::span<float> data, const Call& call) override;
  std::unique_ptr<Communicator> do_split(int color, int key, const std::string& name) override;

 private:
  struct Op;
  struct Executor;
  struct Recv;
  class ThreadsWork;
  class RecvWork;
  class DoneWork;

  // A handle to `op` is being destroyed while `op` is pending (see ThreadsWork).
  static void abandon(Executor& ex, const std::shared_ptr<Op>& op);

  WorkHandle submit(std::shared_ptr<Op> op);
  // On the executing thread: runs `op`, emits its record, marks it done.
  void execute(Op& op);
  void run(Op& op);
  // Collective steps, on the executing thread.
  void enter(Op& op);  // publish + entry barrier + call check
  void meet(Op& op);   // a later barrier of the same operation
  // What rank q published for the operation being executed (after enter()).
  threads_detail::Published& published(int q);
  std::vector<threads_detail::CallDesc> calls();
  void all_reduce(Op& op);
  void reduce_scatter(Op& op);
  void all_gather(Op& op);
  void broadcast(Op& op);
  void split(Op& op);

  std::shared_ptr<threads_detail::Group> group_;
  std::shared_ptr<Executor> executor_;
  // Touched only by the executing thread: barriers passed and collectives entered on this group
  // (the same counts on every rank, since all ranks run the same collectives in order).
  uint64_t barriers_ = 0;
  uint64_t entered_ = 0;
  // The next collective sequence number, mirroring the base's numbering (which split() advances
  // without telling the backend), so that split's messages name the right one. Caller's thread.
  uint64_t next_seq_ = 0;
};

}  // namespace shardlab
