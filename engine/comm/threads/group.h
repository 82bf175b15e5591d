// Internal to the threads backend: the state that the ranks of one group share (one object per
// group, held by every rank's communicator through a shared_ptr), and how they meet.
//
// Rendezvous. Every rank counts the barriers it has passed; the ranks of a group pass the same
// barriers in the same order, so "barrier k" means the same meeting on every rank. A rank arrives
// by storing k in its slot (for diagnostics: who has not arrived) and bumping one shared arrival
// counter; barrier k is complete when the counter reaches k * size. Waiters spin briefly (when the
// group fits on the cores) and then sleep on a condition variable that the last arriver notifies.
// The counter's release/acquire publishes everything a rank wrote before arriving: its slot (call
// description and buffer pointers) and the data it wrote into peers' buffers.
//
// Failures. A group fails once, for good: a rank's thread threw (abort, which also fails every
// group split from this one), a wait timed out (the ranks' sequences no longer line up), a
// communicator was destroyed with operations in flight, or a rank that others wait for has left.
// Waiters at an entry barrier, and every later operation, see the failure at once instead of
// waiting for their timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "engine/comm/comm_record.h"
#include "engine/core/human_format.h"
#include "engine/core/timer.h"

namespace shardlab::threads_detail {

// The operations a rank executes. The collective kinds meet at a rendezvous, where what each rank
// called (CallDesc) is compared across ranks before any data moves; Send and Recv never do.
enum class Kind : uint8_t {
  AllReduce,
  ReduceScatter,
  AllGather,
  Broadcast,
  Barrier,
  Split,
  Send,
  Recv
};
const char* to_string(Kind kind);

// Fields that do not apply to the operation are -1.
struct CallDesc {
  Kind kind = Kind::Barrier;
  int64_t count = -1;  // the whole array's element count
  int reduce = -1;     // a ReduceOp, for all_reduce and reduce_scatter
  int root = -1;       // broadcast
  bool operator==(const CallDesc&) const = default;
  std::string str() const;  // "all_reduce(count 10, sum)"
};

class Group;

// What a rank publishes for one collective: written by that rank's executing thread before it
// arrives at the operation's entry barrier, read by peers until the operation ends.
struct Published {
  CallDesc desc;
  const float* in = nullptr;
  float* out = nullptr;
  int color = 0, key = 0;          // split
  Clock::time_point arrived;       // when the rank reached the operation's entry barrier
  std::shared_ptr<Group> created;  // split: the new group, published by each color's leader
};

// One per rank. Operations alternate between two Published records, so a rank that has left
// operation i (a barrier has a single meeting) can publish operation i + 1 while a slower peer
// still reads what it published for i; it cannot reach i + 2 before every peer has entered i + 1.
struct alignas(64) Slot {
  Published call[2];
  std::atomic<uint64_t> reached{0};   // the last barrier this rank arrived at
  std::atomic<bool> departed{false};  // its communicator was destroyed
};

enum class FailKind { None, Aborted, TimedOut, Destroyed, Departed };

// How a wait ended. `ranks`: the ranks that had not arrived (TimedOut) or that had left the group
// (Departed); `reason`: why the group failed (Failed).
struct WaitResult {
  enum Status { Ok, Failed, TimedOut, Departed } status = Ok;
  std::vector<int> ranks;
  std::string reason;
};

class Group : public std::enable_shared_from_this<Group> {
 public:
  Group(std::string name, int size);
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  const std::string& name() const { return name_; }
  int size() const { return size_; }
  Slot& slot(int rank) { return slots_[static_cast<size_t>(rank)]; }

  // Rank `rank` arrives at its barrier number `k` (1-based) and waits for every rank. An entry
  // barrier (the first of an operation) fails fast when the group has failed or a missing rank has
  // left, and fails the group when it times out; a rank that leaves an entry barrier unsuccessful
  // first withdraws its arrival, so a late peer can never complete the meeting without it and
  // touch its buffers (if the meeting completed first, it returns Ok after all). Later barriers of
  // an operation wait, without a timeout, until every rank arrives: peers may still be reading
  // or writing this rank's buffers, and every rank that passed the entry barrier is coming (no
  // rank waits for anything else inside an operation). `what()` describes the call for a
  // timeout's reason.
  WaitResult barrier(int rank, uint64_t k, bool entry, std::chrono::milliseconds timeout,
                     const std::function<std::string()>& what);

  // Eager point-to-point, matched per (src, dst, tag) in issue order: post() numbers its copy
  // 0, 1, 2, ... and ticket() numbers the receives the same way; receive t takes message t.
  // take() waits up to `timeout` for message `ticket` (moved into `msg`); with `poll` it returns
  // TimedOut at once when the message is not there yet and keeps the ticket. Any other failure
  // abandons the ticket, as abandon() does: its message, now or later, is dropped, so later
  // receives still match later messages.
  WaitResult post(int src, int dst, int tag, std::vector<float>&& msg);
  uint64_t ticket(int src, int dst, int tag);
  WaitResult take(int src, int dst, int tag, uint64_t ticket, std::chrono::milliseconds timeout,
                  bool poll, std::vector<float>& msg);
  void abandon(int src, int dst, int tag, uint64_t ticket);

  // Fails the group (the first failure wins) and wakes every waiter. Aborted also fails every
  // group split from this one, now and later.
  void fail(FailKind kind, const std::string& reason);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  std::string failure_reason() const;
  // `rank` has destroyed its communicator with nothing in flight: peers that wait for it at an
  // entry barrier, or for a message from it, fail at once.
  void depart(int rank);
  // Registers a group split from this one (for abort propagation).
  void add_child(const std::shared_ptr<Group>& child);

 private:
  void notify_all();
  // Ranks whose reached < k.
  std::vector<int> missing(uint64_t k) const;

  const std::string name_;
  const int size_;
  const std::chrono::nanoseconds spin_;
  std::unique_ptr<Slot[]> slots_;
  alignas(64) std::atomic<uint64_t> arrivals_{0};
  alignas(64) std::atomic<bool> failed_{false};

  mutable std::mutex mu_;  // guards failure_*, children_; barrier sleepers wait on cv_
  std::condition_variable cv_;
  FailKind failure_kind_ = FailKind::None;
  std::string failure_reason_;
  uint64_t failure_barrier_ = 0;  // TimedOut: the barrier that timed out
  std::vector<int> failure_missing_;
  std::string abort_reason_;  // set once aborted, even when an earlier failure won
  std::vector<std::weak_ptr<Group>> children_;

  struct Channel {  // messages from one rank to another with one tag
    uint64_t posted = 0, tickets = 0;
    std::map<uint64_t, std::vector<float>> messages;  // by number, not yet taken
    std::set<uint64_t> abandoned;                     // receives that gave up before theirs came
  };
  std::mutex mail_mu_;  // guards mail_; receivers wait on mail_cv_
  std::condition_variable mail_cv_;
  std::map<std::tuple<int, int, int>, Channel> mail_;
};

// "all_reduce on group world (seq 4) timed out after 0.2 s on rank 0: ranks 2, 3 had not arrived"
std::string timeout_message(const std::string& what, std::chrono::milliseconds timeout, int rank,
                            const std::vector<int>& missing);

}  // namespace shardlab::threads_detail
