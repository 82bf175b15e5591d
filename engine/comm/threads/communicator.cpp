#include "engine/comm/threads/communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "engine/comm/threads/group.h"

namespace shardlab {

using threads_detail::CallDesc;
using threads_detail::FailKind;
using threads_detail::Group;
using threads_detail::Kind;
using threads_detail::WaitResult;

namespace {

// Data kernels. Every rank works on its own chunk of the array, directly in the ranks' buffers.
// A block of the result is built in a small stack buffer that stays in L1 while each rank's input
// is folded in (in rank order, so the result is the same whoever computes it), then stored to
// every destination: each input element is read once and each output element written once.
constexpr int64_t kBlock = 4096;  // floats: 16 KiB

constexpr int kNone = -1;  // a CallDesc field that does not apply

template <ReduceOp R>
inline float combine(float a, float b) {
  if constexpr (R == ReduceOp::Max) {
    return a < b ? b : a;
  } else if constexpr (R == ReduceOp::Min) {
    return b < a ? b : a;
  } else {
    return a + b;
  }
}

// acc = (((acc op s[0]) op s[1]) ...), or with First, acc = ((s[0] op s[1]) op ...). Up to four
// sources per pass: reading several streams at once is what keeps the loads flowing (measured:
// 4 ranks' chunks fold ~1.7x faster than in one pass per source), and the order is unchanged.
template <ReduceOp R, int K, bool First>
void fold(float* __restrict acc, const float* const* s, int64_t off, int64_t len) {
  const float* __restrict s0 = s[0] + off;
  const float* __restrict s1 = K > 1 ? s[1] + off : nullptr;
  const float* __restrict s2 = K > 2 ? s[2] + off : nullptr;
  const float* __restrict s3 = K > 3 ? s[3] + off : nullptr;
  for (int64_t j = 0; j < len; ++j) {
    float v = First ? s0[j] : combine<R>(acc[j], s0[j]);
    if constexpr (K > 1) v = combine<R>(v, s1[j]);
    if constexpr (K > 2) v = combine<R>(v, s2[j]);
    if constexpr (K > 3) v = combine<R>(v, s3[j]);
    acc[j] = v;
  }
}

template <ReduceOp R, bool First>
void fold_some(float* acc, const float* const* s, int k, int64_t off, int64_t len) {
  switch (k) {
    case 1:
      return fold<R, 1, First>(acc, s, off, len);
    case 2:
      return fold<R, 2, First>(acc, s, off, len);
    case 3:
      return fold<R, 3, First>(acc, s, off, len);
    default:
      return fold<R, 4, First>(acc, s, off, len);
  }
}

// dst[d][0, len) = reduction over q of src[q][0, len), for every d.
template <ReduceOp R>
void reduce_chunk(const float* const* src, int n, float* const* dst, int ndst, int64_t len) {
  alignas(64) float acc[kBlock];
  const float scale = 1.0f / static_cast<float>(n);
  for (int64_t off = 0; off < len; off += kBlock) {
    const int64_t m = std::min(kBlock, len - off);
    int q = std::min(n, 4);
    fold_some<R, true>(acc, src, q, off, m);
    for (; q < n; q += 4) fold_some<R, false>(acc, src + q, std::min(n - q, 4), off, m);
    if constexpr (R == ReduceOp::Avg)
      for (int64_t j = 0; j < m; ++j) acc[j] *= scale;
    for (int d = 0; d < ndst; ++d)
      std::memcpy(dst[d] + off, acc, static_cast<size_t>(m) * sizeof(float));
  }
}

void reduce_chunk(ReduceOp op, const float* const* src, int n, float* const* dst, int ndst,
                  int64_t len) {
  if (len <= 0) return;
  switch (op) {
    case ReduceOp::Sum:
      return reduce_chunk<ReduceOp::Sum>(src, n, dst, ndst, len);
    case ReduceOp::Avg:
      return reduce_chunk<ReduceOp::Avg>(src, n, dst, ndst, len);
    case ReduceOp::Max:
      return reduce_chunk<ReduceOp::Max>(src, n, dst, ndst, len);
    case ReduceOp::Min:
      return reduce_chunk<ReduceOp::Min>(src, n, dst, ndst, len);
  }
}

// dst[d][0, len) = src[0, len) for every d; a destination that is the source itself is skipped.
// Blocked so the source is read from memory once however many destinations there are.
void copy_chunk(const float* src, float* const* dst, int ndst, int64_t len) {
  constexpr int64_t kCopyBlock = 2 * kBlock;
  for (int64_t off = 0; off < len; off += kCopyBlock) {
    const auto bytes = static_cast<size_t>(std::min(kCopyBlock, len - off)) * sizeof(float);
    for (int d = 0; d < ndst; ++d)
      if (dst[d] != src) std::memcpy(dst[d] + off, src + off, bytes);
  }
}

}  // namespace

// One queued operation: its call, its buffers and, once done, its outcome.
struct ThreadsCommunicator::Op {
  Kind kind = Kind::Barrier;
  Call call;
  CallDesc desc;
  const float* in = nullptr;
  float* out = nullptr;
  // split
  int color = 0, key = 0;
  std::string name;
  uint64_t split_seq = 0;
  std::unique_ptr<Communicator> result;

  std::exception_ptr error;
  std::atomic<int> state{0};  // 0 pending, 1 done, 2 failed; written under Executor::mu

  std::string what() const {
    if (kind == Kind::Split)
      return fmt::format("split on group {} (seq {})", call.record.group, split_seq);
    return call.describe();
  }
};

// A rank's queue of operations and the thread that makes progress on them. Operations run one at
// a time in issue order, by the progress thread or by a caller waiting for one (see the header).
struct ThreadsCommunicator::Executor {
  ThreadsCommunicator* comm = nullptr;  // valid until the communicator's destructor stops us
  std::mutex mu;
  std::condition_variable work_cv;  // the progress thread sleeps here
  std::condition_variable done_cv;  // waiters sleep here
  std::deque<std::shared_ptr<Op>> queue;
  bool executing = false;
  bool stopping = false;
  std::thread thread;
  std::vector<std::weak_ptr<Recv>> recvs;  // posted receives, failed by the destructor

  // With `lock` held and an operation queued: runs the front one with the lock released.
  void run_front(std::unique_lock<std::mutex>& lock) {
    std::shared_ptr<Op> op = std::move(queue.front());
    queue.pop_front();
    executing = true;
    lock.unlock();
    comm->execute(*op);
    lock.lock();
    executing = false;
    op->state.store(op->error ? 2 : 1, std::memory_order_release);
    done_cv.notify_all();
  }

  void loop() {
    std::unique_lock lock(mu);
    for (;;) {
      work_cv.wait(lock, [&] { return stopping || (!executing && !queue.empty()); });
      if (stopping) return;
      run_front(lock);
    }
  }

  // Returns once `op` has completed or failed. Runs queued operations itself while nobody else
  // is, so a blocking call executes on the caller's thread without a hand-off. Bounded: an
  // operation waits at most the timeout to enter (every rank is then inside it and its later
  // meetings only wait for peers' copies), and a timeout fails the group, so the operations
  // queued behind it fail at once.
  void wait(const Op& op) {
    std::unique_lock lock(mu);
    while (op.state.load(std::memory_order_acquire) == 0) {
      if (!executing && !queue.empty() && !stopping)
        run_front(lock);
      else
        done_cv.wait(lock);
    }
    // Operations issued after this one are the progress thread's again.
    if (!executing && !queue.empty()) work_cv.notify_one();
  }
};

// A posted receive. Point-to-point operations bypass the executor: a send is copied into the
// peer's mailbox when issued, and a receive takes its message (matched by ticket, see Group) in
// wait() or done(), on the caller's thread, so neither waits for collectives queued before it.
struct ThreadsCommunicator::Recv {
  Call call;
  float* out = nullptr;
  int64_t count = 0;
  uint64_t ticket = 0;
  std::exception_ptr error;
  std::atomic<int> state{0};  // as Op::state; written under Executor::mu
};

class ThreadsCommunicator::ThreadsWork final : public Work {
 public:
  ThreadsWork(std::shared_ptr<Op> op, std::shared_ptr<Executor> executor)
      : op_(std::move(op)), executor_(std::move(executor)) {}
  // A pending operation must not outlive its handle's promise that the buffers are free: one
  // not started yet is taken off the queue and failed; one in flight is ended (the group fails)
  // and waited for.
  ~ThreadsWork() override {
    if (op_->state.load(std::memory_order_acquire) != 0) return;
    try {
      ThreadsCommunicator::abandon(*executor_, op_);
    } catch (...) {  // a destructor must not throw; abandon() itself only fails on allocation
    }
  }
  void wait() override {
    if (op_->state.load(std::memory_order_acquire) == 0) executor_->wait(*op_);
    if (op_->error) std::rethrow_exception(op_->error);
  }
  bool done() override { return op_->state.load(std::memory_order_acquire) != 0; }

 private:
  std::shared_ptr<Op> op_;
  std::shared_ptr<Executor> executor_;  // keeps the queue alive for a handle that outlives us
};

class ThreadsCommunicator::RecvWork final : public Work {
 public:
  RecvWork(std::shared_ptr<Recv> recv, std::shared_ptr<Executor> executor,
           std::shared_ptr<Group> group, int rank, std::chrono::milliseconds timeout)
      : recv_(std::move(recv)),
        executor_(std::move(executor)),
        group_(std::move(group)),
        rank_(rank),
        timeout_(timeout) {}
  // Dropping a pending receive cancels it: its message, now or later, is discarded.
  ~RecvWork() override {
    if (recv_->state.load(std::memory_order_acquire) != 0) return;
    try {
      group_->abandon(recv_->call.record.peer, rank_, recv_->call.record.tag, recv_->ticket);
      finish({WaitResult::Failed, {}, "its handle was destroyed first"}, {});
    } catch (...) {
    }
  }
  void wait() override {
    if (recv_->state.load(std::memory_order_acquire) == 0) take(false);
    if (recv_->error) std::rethrow_exception(recv_->error);
  }
  bool done() override {
    if (recv_->state.load(std::memory_order_acquire) == 0) take(true);
    return recv_->state.load(std::memory_order_acquire) != 0;
  }

 private:
  void take(bool poll) {
    std::vector<float> msg;
    const WaitResult r = group_->take(recv_->call.record.peer, rank_, recv_->call.record.tag,
                                      recv_->ticket, timeout_, poll, msg);
    if (poll && r.status == WaitResult::TimedOut) return;
    finish(r, std::move(msg));
  }
  void finish(const WaitResult& r, std::vector<float> msg);

  std::shared_ptr<Recv> recv_;
  std::shared_ptr<Executor> executor_;
  std::shared_ptr<Group> group_;
  int rank_;
  std::chrono::milliseconds timeout_;
};

// A send: complete (or failed) when issued.
class ThreadsCommunicator::DoneWork final : public Work {
 public:
  explicit DoneWork(std::exception_ptr error) : error_(std::move(error)) {}
  void wait() override {
    if (error_) std::rethrow_exception(error_);
  }
  bool done() override { return true; }

 private:
  std::exception_ptr error_;
};

void ThreadsCommunicator::abandon(Executor& ex, const std::shared_ptr<Op>& op) {
  std::unique_lock lock(ex.mu);
  if (op->state.load(std::memory_order_acquire) != 0) return;
  ThreadsCommunicator* comm = ex.comm;
  const auto it = std::find(ex.queue.begin(), ex.queue.end(), op);
  if (it != ex.queue.end() && comm) {
    // Not started: it never will be. The peers run it without us, so the group is out of step.
    ex.queue.erase(it);
    const std::string why =
        fmt::format("rank {} dropped the handle of {} before it ran", comm->rank(), op->what());
    comm->group_->fail(FailKind::Destroyed, why);
    op->error = std::make_exception_ptr(
        CommError(fmt::format("{} on rank {}: its handle was destroyed before it ran", op->what(),
                              comm->rank()),
                  detail::where(__FILE__, __LINE__, nullptr)));
    if (op->kind != Kind::Split) op->error = comm->report_failure(op->call.record, op->error);
    op->state.store(2, std::memory_order_release);
    ex.done_cv.notify_all();
    return;
  }
  // In flight (or being failed by the communicator's destructor): failing the group ends it
  // promptly; its last meeting still waits for peers using our buffers.
  if (comm)
    comm->group_->fail(FailKind::Destroyed,
                       fmt::format("rank {} dropped the handle of {} while it was in flight",
                                   comm->rank(), op->what()));
  ex.done_cv.wait(lock, [&] { return op->state.load(std::memory_order_acquire) != 0; });
}

void ThreadsCommunicator::RecvWork::finish(const WaitResult& r, std::vector<float> msg) {
  Executor& ex = *executor_;
  std::lock_guard lock(ex.mu);
  Recv& rv = *recv_;
  if (rv.state.load(std::memory_order_acquire) != 0) return;  // failed meanwhile
  ThreadsCommunicator* comm = ex.comm;
  const std::string what = rv.call.describe();
  const int src = rv.call.record.peer, tag = rv.call.record.tag;
  try {
    if (!comm)
      SL_THROW(CommError, "{} on rank {}: the communicator was destroyed first", what, rank_);
    if (r.status == WaitResult::TimedOut)
      SL_THROW(TimeoutError,
               "{} timed out after {:g} s on rank {}: no message from rank {} with tag {} had "
               "arrived",
               what, static_cast<double>(timeout_.count()) / 1000.0, rank_, src, tag);
    if (r.status == WaitResult::Departed)
      SL_THROW(CommError,
               "{} on rank {}: rank {} left group {} (destroyed its communicator) and will not "
               "send",
               what, rank_, src, group_->name());
    if (r.status != WaitResult::Ok)
      SL_THROW(CommError, "{} on rank {}: cannot complete because {}", what, rank_, r.reason);
    if (static_cast<int64_t>(msg.size()) != rv.count)
      SL_THROW(CommError,
               "{} on rank {}: rank {} sent {} elements with tag {}, but this receive expects {}",
               what, rank_, src, msg.size(), tag, rv.count);
    if (rv.count > 0) std::memcpy(rv.out, msg.data(), msg.size() * sizeof(float));
  } catch (...) {
    rv.error = std::current_exception();
  }
  if (comm && rv.error) {
    rv.error = comm->report_failure(rv.call.record, rv.error);
  } else if (comm) {
    try {
      comm->report(rv.call.record, true);
    } catch (...) {
      rv.error = std::current_exception();
    }
  }
  rv.state.store(rv.error ? 2 : 1, std::memory_order_release);
}

ThreadsCommunicator::ThreadsCommunicator(std::shared_ptr<Group> group, int rank, std::string name,
                                         CommOptions options)
    : Communicator(rank, group ? group->size() : 0, std::move(name), std::move(options)),
      group_(std::move(group)),
      executor_(std::make_shared<Executor>()) {
  executor_->comm = this;
}

ThreadsCommunicator::~ThreadsCommunicator() {
  Executor& ex = *executor_;
  bool busy;
  {
    std::lock_guard lock(ex.mu);
    busy = ex.executing || !ex.queue.empty();
  }
  // An operation in flight may be waiting for peers that will never come (they may be gone too):
  // failing the group ends it promptly. With nothing in flight, peers only need to know we left,
  // unless an exception is unwinding this rank: then the abort that follows (run_threads) tells
  // them why, which a departure noticed first would hide.
  if (busy)
    group_->fail(FailKind::Destroyed,
                 fmt::format("rank {} destroyed its communicator of group {} with operations "
                             "in flight",
                             rank(), name()));
  else if (std::uncaught_exceptions() == 0)
    group_->depart(rank());
  {
    std::unique_lock lock(ex.mu);
    ex.stopping = true;
    ex.work_cv.notify_all();
    ex.done_cv.wait(lock, [&] { return !ex.executing; });
  }
  if (ex.thread.joinable()) ex.thread.join();
  std::deque<std::shared_ptr<Op>> rest;
  {
    std::lock_guard lock(ex.mu);
    rest.swap(ex.queue);
  }
  for (auto& op : rest) {
    op->error = std::make_exception_ptr(
        CommError(fmt::format("{} on rank {}: the communicator was destroyed before the "
                              "operation ran",
                              op->what(), rank()),
                  detail::where(__FILE__, __LINE__, nullptr)));
    if (op->kind != Kind::Split) op->error = report_failure(op->call.record, op->error);
    std::lock_guard lock(ex.mu);
    op->state.store(2, std::memory_order_release);
    ex.done_cv.notify_all();
  }
  std::lock_guard lock(ex.mu);
  for (auto& weak : ex.recvs) {
    auto rv = weak.lock();
    if (!rv || rv->state.load(std::memory_order_acquire) != 0) continue;
    group_->abandon(rv->call.record.peer, rank(), rv->call.record.tag, rv->ticket);
    rv->error = std::make_exception_ptr(
        CommError(fmt::format("{} on rank {}: the communicator was destroyed before the message "
                              "was received",
                              rv->call.describe(), rank()),
                  detail::where(__FILE__, __LINE__, nullptr)));
    rv->error = report_failure(rv->call.record, rv->error);
    rv->state.store(2, std::memory_order_release);
  }
  ex.recvs.clear();
  ex.comm = nullptr;
}

void ThreadsCommunicator::abort(const std::string& reason) {
  group_->fail(FailKind::Aborted, reason);
}

// ---- issuing ----------------------------------------------------------------------------------

WorkHandle ThreadsCommunicator::submit(std::shared_ptr<Op> op) {
  Executor& ex = *executor_;
  {
    std::lock_guard lock(ex.mu);
    // Started on first use: communicators that only ever block (most sub-groups) need no thread.
    if (!ex.thread.joinable()) ex.thread = std::thread([e = &ex] { e->loop(); });
    ex.queue.push_back(op);
  }
  ex.work_cv.notify_one();
  return std::make_shared<ThreadsWork>(std::move(op), executor_);
}

WorkHandle ThreadsCommunicator::do_all_reduce(std::span<float> data, const Call& call) {
  auto op = std::make_shared<Op>();
  op->kind = Kind::AllReduce;
  op->call = call;
  op->desc = {Kind::AllReduce, static_cast<int64_t>(data.size()), static_cast<int>(call.reduce),
              kNone};
  op->out = data.data();
  next_seq_ = call.record.seq + 1;
  return submit(std::move(op));
}

WorkHandle ThreadsCommunicator::do_reduce_scatter(std::span<const float> input,
                                                  std::span<float> output, const Call& call) {
  auto op = std::make_shared<Op>();
  op->kind = Kind::ReduceScatter;
  op->call = call;
  op->desc = {Kind::ReduceScatter, static_cast<int64_t>(input.size()),
              static_cast<int>(call.reduce), kNone};
  op->in = input.data();
  op->out = output.data();
  next_seq_ = call.record.seq + 1;
  return submit(std::move(op));
}

WorkHandle ThreadsCommunicator::do_all_gather(std::span<const float> input, std::span<float> output,
                                              const Call& call) {
  auto op = std::make_shared<Op>();
  op->kind = Kind::AllGather;
  op->call = call;
  op->desc = {Kind::AllGather, static_cast<int64_t>(output.size()), kNone, kNone};
  op->in = input.data();
  op->out = output.data();
  next_seq_ = call.record.seq + 1;
  return submit(std::move(op));
}

WorkHandle ThreadsCommunicator::do_broadcast(std::span<float> data, const Call& call) {
  auto op = std::make_shared<Op>();
  op->kind = Kind::Broadcast;
  op->call = call;
  op->desc = {Kind::Broadcast, static_cast<int64_t>(data.size()), kNone, call.root};
  op->out = data.data();
  next_seq_ = call.record.seq + 1;
  return submit(std::move(op));
}

WorkHandle ThreadsCommunicator::do_barrier(const Call& call) {
  auto op = std::make_shared<Op>();
  op->kind = Kind::Barrier;
  op->call = call;
  op->desc = {Kind::Barrier, kNone, kNone, kNone};
  next_seq_ = call.record.seq + 1;
  return submit(std::move(op));
}

WorkHandle ThreadsCommunicator::do_send(std::span<const float> data, const Call& call) {
  // Eager, at once: not ordered with the collectives queued before it (as in MPI).
  std::exception_ptr error;
  try {
    const WaitResult r = group_->post(rank(), call.record.peer, call.record.tag,
                                      std::vector<float>(data.begin(), data.end()));
    if (r.status != WaitResult::Ok)
      SL_THROW(CommError, "{} on rank {}: cannot complete because {}", call.describe(), rank(),
               r.reason);
  } catch (...) {
    error = std::current_exception();
  }
  if (error) {
    error = report_failure(call.record, error);
  } else {
    try {
      report(call.record, true);
    } catch (...) {
      error = std::current_exception();
    }
  }
  return std::make_shared<DoneWork>(std::move(error));
}

WorkHandle ThreadsCommunicator::do_recv(std::span<float> data, const Call& call) {
  auto rv = std::make_shared<Recv>();
  rv->call = call;
  rv->out = data.data();
  rv->count = static_cast<int64_t>(data.size());
  rv->ticket = group_->ticket(call.record.peer, rank(), call.record.tag);
  {
    Executor& ex = *executor_;
    std::lock_guard lock(ex.mu);
    std::erase_if(ex.recvs, [](const std::weak_ptr<Recv>& w) {
      auto p = w.lock();
      return !p || p->state.load(std::memory_order_acquire) != 0;
    });
    ex.recvs.push_back(rv);
  }
  return std::make_shared<RecvWork>(std::move(rv), executor_, group_, rank(), options().timeout);
}

std::unique_ptr<Communicator> ThreadsCommunicator::do_split(int color, int key,
                                                            const std::string& name) {
  // Queued like any collective, so it runs after the operations issued before it.
  auto op = std::make_shared<Op>();
  op->kind = Kind::Split;
  op->call.record.group = this->name();
  op->call.record.rank = rank();
  op->call.record.group_size = size();
  op->desc = {Kind::Split, kNone, kNone, kNone};
  op->color = color;
  op->key = key;
  op->name = name;
  op->split_seq = next_seq_++;
  submit(op)->wait();
  return std::move(op->result);
}

// ---- executing --------------------------------------------------------------------------------

void ThreadsCommunicator::execute(Op& op) {
  try {
    run(op);
  } catch (...) {
    op.error = std::current_exception();
  }
  if (op.kind == Kind::Split) return;  // not a CommOp: no record
  if (op.error) {
    op.error = report_failure(op.call.record, op.error);
    return;
  }
  try {
    report(op.call.record, true);
  } catch (...) {
    op.error = std::current_exception();
  }
}

void ThreadsCommunicator::run(Op& op) {
  switch (op.kind) {
    case Kind::AllReduce:
      return all_reduce(op);
    case Kind::ReduceScatter:
      return reduce_scatter(op);
    case Kind::AllGather:
      return all_gather(op);
    case Kind::Broadcast:
      return broadcast(op);
    case Kind::Barrier:
      return enter(op);
    case Kind::Split:
      return split(op);
    case Kind::Send:
    case Kind::Recv:
      break;  // never queued
  }
}

namespace {

[[noreturn]] void throw_wait_failure(const WaitResult& r, const std::string& what, int rank,
                                     const std::string& group, std::chrono::milliseconds timeout) {
  switch (r.status) {
    case WaitResult::TimedOut:
      SL_THROW(TimeoutError, "{}", threads_detail::timeout_message(what, timeout, rank, r.ranks));
    case WaitResult::Departed:
      SL_THROW(CommError,
               "{} on rank {}: {} left group {} (destroyed its communicator) and will not take "
               "part",
               what, rank, shardlab::rank_list(r.ranks, {.label = true}), group);
    default:
      SL_THROW(CommError, "{} on rank {}: cannot complete because {}", what, rank, r.reason);
  }
}

// Names the fields in which the calls differ, and which ranks made which call.
std::string describe_mismatch(const std::vector<CallDesc>& all) {
  std::vector<CallDesc> calls;
  std::vector<std::vector<int>> who;
  for (int q = 0; q < static_cast<int>(all.size()); ++q) {
    const CallDesc& d = all[static_cast<size_t>(q)];
    auto it = std::find(calls.begin(), calls.end(), d);
    if (it == calls.end()) {
      calls.push_back(d);
      who.push_back({q});
    } else {
      who[static_cast<size_t>(it - calls.begin())].push_back(q);
    }
  }
  std::vector<std::string> fields;
  auto differs = [&](auto field) {
    for (const CallDesc& c : calls)
      if (field(c) != field(calls[0])) return true;
    return false;
  };
  if (differs([](const CallDesc& c) { return c.kind; })) {
    fields.push_back("operation");
  } else {
    if (differs([](const CallDesc& c) { return c.count; })) fields.push_back("count");
    if (differs([](const CallDesc& c) { return c.reduce; })) fields.push_back("reduce op");
    if (differs([](const CallDesc& c) { return c.root; })) fields.push_back("root");
  }
  std::string s = "the ranks' calls disagree (";
  for (size_t i = 0; i < fields.size(); ++i) s += (i ? " and " : "") + fields[i];
  s += " differ" + std::string(fields.size() == 1 ? "s" : "") + "): ";
  for (size_t i = 0; i < calls.size(); ++i)
    s += fmt::format("{}{} called {}", i ? "; " : "", shardlab::rank_list(who[i], {.label = true}),
                     calls[i].str());
  return s;
}

}  // namespace

threads_detail::Published& ThreadsCommunicator::published(int q) {
  return group_->slot(q).call[(entered_ - 1) & 1];
}

std::vector<CallDesc> ThreadsCommunicator::calls() {
  std::vector<CallDesc> all;
  for (int q = 0; q < size(); ++q) all.push_back(published(q).desc);
  return all;
}

void ThreadsCommunicator::enter(Op& op) {
  // Publishing is safe only while the group works: a rank can leave a failed operation while a
  // slow peer still reads the records of the one before it, which share this parity. Once the
  // group fails it stays failed, so this check sees every failure that let us leave early.
  if (group_->failed())
    throw_wait_failure({WaitResult::Failed, {}, group_->failure_reason()}, op.what(), rank(),
                       name(), options().timeout);
  ++entered_;
  threads_detail::Published& me = published(rank());
  me.desc = op.desc;
  me.in = op.in;
  me.out = op.out;
  me.color = op.color;
  me.key = op.key;
  me.arrived = Clock::now();
  const WaitResult r =
      group_->barrier(rank(), ++barriers_, true, options().timeout, [&] { return op.what(); });
  if (r.status != WaitResult::Ok)
    throw_wait_failure(r, op.what(), rank(), name(), options().timeout);
  // Every rank sees the same records and fails here too, after the same single meeting.
  for (int q = 1; q < size(); ++q)
    if (!(published(q).desc == published(0).desc))
      SL_THROW(CommError, "{} on rank {}: {}", op.what(), rank(), describe_mismatch(calls()));
  // Who arrived last, and how long this rank waited for it (communicator.h, "Waits").
  if (size() > 1) {
    int last = 0;
    for (int q = 1; q < size(); ++q)
      if (published(q).arrived > published(last).arrived) last = q;
    op.call.record.last = last;
    op.call.record.wait =
        std::chrono::duration<double>(published(last).arrived - me.arrived).count();
  }
}

void ThreadsCommunicator::meet(Op& op) {
  const WaitResult r =
      group_->barrier(rank(), ++barriers_, false, options().timeout, [&] { return op.what(); });
  if (r.status != WaitResult::Ok)
    throw_wait_failure(r, op.what(), rank(), name(), options().timeout);
}

void ThreadsCommunicator::all_reduce(Op& op) {
  enter(op);
  const int n = size();
  const IndexRange mine = chunk_range(op.desc.count, n, rank());
  if (n > 1 && mine.size() > 0) {
    std::vector<float*> bufs(static_cast<size_t>(n));
    for (int q = 0; q < n; ++q) bufs[static_cast<size_t>(q)] = published(q).out + mine.begin;
    // Reads and writes only chunk `rank` of every buffer, which no other rank touches.
    reduce_chunk(op.call.reduce, bufs.data(), n, bufs.data(), n, mine.size());
  }
  meet(op);
}

void ThreadsCommunicator::reduce_scatter(Op& op) {
  enter(op);
  const int n = size();
  const IndexRange mine = chunk_range(op.desc.count, n, rank());
  if (mine.size() > 0) {
    std::vector<const float*> src(static_cast<size_t>(n));
    for (int q = 0; q < n; ++q) src[static_cast<size_t>(q)] = published(q).in + mine.begin;
    float* dst = op.out;
    reduce_chunk(op.call.reduce, src.data(), n, &dst, 1, mine.size());
  }
  meet(op);
}

void ThreadsCommunicator::all_gather(Op& op) {
  enter(op);
  const int n = size();
  const IndexRange mine = chunk_range(op.desc.count, n, rank());
  if (mine.size() > 0) {
    // Push: this rank's input goes into its chunk of every rank's output.
    std::vector<float*> dst(static_cast<size_t>(n));
    for (int q = 0; q < n; ++q) dst[static_cast<size_t>(q)] = published(q).out + mine.begin;
    copy_chunk(op.in, dst.data(), n, mine.size());
  }
  meet(op);
}

void ThreadsCommunicator::broadcast(Op& op) {
  enter(op);
  const int n = size(), root = op.desc.root;
  const IndexRange mine = chunk_range(op.desc.count, n, rank());
  if (n > 1 && mine.size() > 0) {
    // Every rank copies its chunk of the root's buffer to the others, sharing the work.
    const float* src = published(root).out + mine.begin;
    std::vector<float*> dst;
    for (int q = 0; q < n; ++q)
      if (q != root) dst.push_back(published(q).out + mine.begin);
    copy_chunk(src, dst.data(), static_cast<int>(dst.size()), mine.size());
  }
  meet(op);
}

void ThreadsCommunicator::split(Op& op) {
  enter(op);
  const int n = size();
  std::vector<std::pair<int, int>> members;  // (key, old rank) of everyone with my color
  int leader = n;
  if (op.color >= 0) {
    for (int q = 0; q < n; ++q)
      if (published(q).color == op.color) {
        members.emplace_back(published(q).key, q);
        leader = std::min(leader, q);
      }
    std::sort(members.begin(), members.end());
    if (leader == rank()) {
      try {
        auto g = std::make_shared<Group>(op.name, static_cast<int>(members.size()));
        group_->add_child(g);
        published(rank()).created = std::move(g);
      } catch (...) {  // the others see no group and fail below, after meeting
        published(rank()).created.reset();
      }
    }
  }
  meet(op);  // the leaders have published their groups
  std::shared_ptr<Group> g = op.color >= 0 ? published(leader).created : nullptr;
  meet(op);  // everyone has taken theirs
  if (leader == rank()) published(rank()).created.reset();
  if (op.color < 0) return;
  if (!g)
    SL_THROW(CommError, "{} on rank {}: rank {} could not create group {}", op.what(), rank(),
             leader, op.name);
  const auto pos = std::find(members.begin(), members.end(), std::make_pair(op.key, rank()));
  op.result = std::make_unique<ThreadsCommunicator>(
      std::move(g), static_cast<int>(pos - members.begin()), op.name, options());
}

}  // namespace shardlab
