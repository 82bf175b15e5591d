// The Channel (channel.h): submitting to the queue, running it (on a waiting caller's thread or on
// the progress thread), the arrival gate's deadline and what a timeout does to the queue, the
// release of dropped handles, and the draining shutdown. Also CollectiveWork, the Work handle of a
// queued collective.
#include "engine/comm/mpi/channel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/comm/mpi/liveness.h"
#include "engine/comm/mpi/mpi_util.h"

namespace shardlab {
namespace mpi_detail {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// How long a queued collective waits for a caller to run it (the blocking forms call wait() at
// once) before the progress thread starts it in the background.
constexpr auto kGrace = microseconds(200);
// While collectives keep coming, an idle progress thread looks at the queue this often instead of
// being woken by every submit; after kIdleDeep without any, it sleeps until woken.
constexpr auto kIdlePoll = milliseconds(2);
constexpr auto kIdleDeep = milliseconds(100);
// How long a destructor waits for the queue of a communicator that already failed (a healthy one
// gets the full timeout).
constexpr auto kBrokenDrain = milliseconds(1000);
// How long shutdown waits for an abandoned progress thread to leave its arrival gate.
constexpr auto kStopGrace = milliseconds(500);

class CollectiveWork final : public Work {
 public:
  CollectiveWork(std::shared_ptr<Channel> channel, std::shared_ptr<Op> op)
      : ch_(std::move(channel)), op_(std::move(op)) {}
  // Dropped without wait() (an exception unwinding, typically, which frees the buffers next).
  ~CollectiveWork() override {
    if (!op_->settled() && !op_->detached.load()) ch_->release(*op_);
  }

  void wait() override {
    if (timed_out_.load(std::memory_order_acquire)) std::rethrow_exception(timeout_error_);
    try {
      if (!op_->settled() && !op_->detached.load()) ch_->wait(*op_, Clock::now() + ch_->timeout());
    } catch (const TimeoutError&) {
      timeout_error_ = std::current_exception();
      timed_out_.store(true, std::memory_order_release);
      throw;
    }
    if (op_->detached.load())
      SL_THROW(CommError,
               "{}: not performed on this rank's buffers: the communicator failed first ({}); the "
               "process should end",
               op_->what, ch_->why_broken());
    if (op_->error) std::rethrow_exception(op_->error);
    if (!op_->finished.load(std::memory_order_acquire))
      SL_THROW(CommError, "{}: the communicator was destroyed before the operation completed",
               op_->what);
  }

  // A detached op will never run on the caller's buffers: it is over for the caller (wait throws).
  bool done() override {
    return timed_out_.load(std::memory_order_acquire) || op_->detached.load() || op_->settled();
  }

 private:
  std::shared_ptr<Channel> ch_;
  std::shared_ptr<Op> op_;
  std::atomic<bool> timed_out_{false};
  std::exception_ptr timeout_error_;  // written before timed_out_
};

}  // namespace

WorkHandle Channel::submit(std::shared_ptr<Op> op) {
  op->queued_at = Clock::now();
  {
    std::unique_lock lock(mu_);
    if (!broken_.empty()) {
      const std::string why = broken_;
      lock.unlock();
      reject(*op, why);
    }
    queue_.push_back(op);
    // Only a progress thread in deep sleep needs waking (a futex wake-up and a context switch on
    // this core, measured at several percent of a 1 MiB all-reduce); a busy runner hands
    // leftovers over when it is done.
    last_submit_ = op->queued_at;
    if (worker_idle_ && !busy_) worker_cv_.notify_one();
  }
  return std::make_shared<CollectiveWork>(shared_from_this(), std::move(op));
}

void Channel::release(Op& op) {
  std::unique_lock lock(mu_);
  if (op.settled() || op.detached.load()) return;
  if (op.in_body) {
    waiter_cv_.wait(lock, [&] { return op.settled(); });
    return;
  }
  op.detach();
  const bool emit_now = op.claim();
  lock.unlock();
  if (emit_now) report(op, false);
}

void Channel::ensure_usable(Op& op) {
  std::unique_lock lock(mu_);
  if (broken_.empty()) return;
  const std::string why = broken_;
  lock.unlock();
  reject(op, why);
}

void Channel::reject(Op& op, const std::string& why) {
  std::exception_ptr error = std::make_exception_ptr(
      CommError(fmt::format("{}: this communicator is unusable since {}; the process should end",
                            op.what, why),
                detail::where(__FILE__, __LINE__, nullptr)));
  if (op.claim()) error = report_failure(op, std::move(error));
  std::rethrow_exception(error);
}

Channel::Outcome Channel::execute(Op& op, const Clock::time_point* deadline) {
  bool ok = true;
  const InFlight in_flight(&op, op.what);  // what this rank was in, should it be stopped
  try {
    if (!op.gate_started) {
      op.arrived = Clock::now();
      op.gate.start(gate_comm_, rank_, size_, op.sig);
      op.gate_started = true;
    }
    Backoff backoff;
    while (!op.gate.poll()) {
      if (deadline && Clock::now() >= *deadline) return Outcome::TimedOut;
      if (!deadline && abandon_.load()) {
        op.gate.cancel();
        return Outcome::Abandoned;
      }
      backoff.pause();
    }
    op.gate.verify(op.what);
    // The gate opens when the last rank arrives. The wait is by the exchanged arrival times
    // (gate.h), capped by the time this rank really spent in the gate.
    if (size_ > 1) {
      const double in_gate = std::chrono::duration<double>(Clock::now() - op.arrived).count();
      const double wait = op.gate.wait_seconds();
      op.record.wait = wait < 0 ? in_gate : std::min(wait, in_gate);
      op.record.last = op.gate.last_arrival();
    }
    {
      std::lock_guard lock(mu_);
      op.in_body = true;  // from here on its buffers stay where they are
    }
    op.body(op);
  } catch (const CallsDisagree&) {
    op.error = std::current_exception();
    ok = false;
  } catch (const Error& e) {
    op.error =
        std::make_exception_ptr(CommError(fmt::format("{}: {}", op.what, e.what()), e.where()));
    ok = false;
    op.broke = true;
  } catch (...) {
    op.error = std::current_exception();
    ok = false;
    op.broke = true;
  }
  // The record first, so that it is in the sink when wait() returns.
  if (op.claim()) {
    if (ok)
      report(op, true);
    else
      op.error = report_failure(op, op.error);
  }
  return Outcome::Done;
}

void Channel::publish(Op& op) {
  if (op.broke && broken_.empty()) broken_ = fmt::format("{} failed", op.what);
  op.finished.store(true, std::memory_order_release);
  if (op.timed_out) add_unfinished(-1);
  if (!queue_.empty() && queue_.front().get() == &op) queue_.pop_front();
}

void Channel::wait(Op& op, Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  // A detached operation is no longer this caller's: CollectiveWork::wait reports why.
  while (!op.settled() && !op.detached.load()) {
    if (!busy_ && !abandon_.load()) {
      // Nobody runs the queue: run it here, up to `op`. The blocking path thus needs no hand-off
      // to another thread.
      busy_ = true;
      std::shared_ptr<Op> stuck;
      while (!op.settled() && !queue_.empty()) {
        std::shared_ptr<Op> next = queue_.front();
        lock.unlock();
        const Outcome out = execute(*next, &deadline);
        lock.lock();
        if (out == Outcome::Done) {
          publish(*next);
        } else {
          next->handed_off = true;  // the progress thread keeps polling its gate
          stuck = std::move(next);
          break;
        }
      }
      busy_ = false;
      if (!queue_.empty() && worker_idle_) worker_cv_.notify_one();
      waiter_cv_.notify_all();
      if (stuck) time_out(lock, op, stuck.get() == &op ? nullptr : stuck.get());
      continue;
    }
    if (op.in_body) {
      // Every rank is in the collective itself: it completes, so wait for it.
      waiter_cv_.wait(lock);
      continue;
    }
    if (Clock::now() >= deadline) {
      time_out(lock, op,
               queue_.empty() || queue_.front().get() == &op ? nullptr : queue_.front().get());
      continue;
    }
    waiter_cv_.wait_until(lock, deadline);
  }
}

void Channel::time_out(std::unique_lock<std::mutex>& lock, Op& op, const Op* blocking) {
  if (!op.claim()) {
    // Its runner finished it just now and is publishing.
    waiter_cv_.wait(lock, [&] { return op.settled(); });
    return;
  }
  op.timed_out = true;
  add_unfinished(+1);  // until it finishes: MPI_Finalize must not wait for it
  if (broken_.empty()) broken_ = fmt::format("{} timed out", op.what);
  const std::string behind =
      blocking ? fmt::format(" (queued behind {}, which had not completed)", blocking->what) : "";
  // The caller is about to unwind and free its buffers, and so may the callers of everything
  // queued: what has not started its transfer goes on with private copies (and counts as failed
  // for this rank).
  std::vector<std::shared_ptr<Op>> failed;
  for (auto& q : queue_) {
    if (q->in_body || q->detached.load()) continue;
    q->detach();
    if (q.get() != &op && q->claim()) failed.push_back(q);
  }
  lock.unlock();
  // Which rank is missing: the survivors time out together and answer each other's probe.
  std::string liveness = probe_liveness(liveness_window(timeout_));
  if (liveness.empty())
    liveness =
        "the mpi backend cannot tell which ranks had not arrived (look for a rank that is late, "
        "has failed or never issued this collective)";
  // The timed-out operation's record first (then the queued ones', as they were queued); its
  // flight record therefore shows those still issued, behind it.
  std::exception_ptr error = report_failure(
      op, std::make_exception_ptr(TimeoutError(
              fmt::format("{} timed out after {} ms on rank {} of {}{}: {}; this communicator is "
                          "now unusable and the process should end",
                          op.what, timeout_.count(), rank_, size_, behind, liveness),
              detail::where(__FILE__, __LINE__, nullptr))));
  for (auto& q : failed) report(*q, false);
  std::rethrow_exception(error);
}

void Channel::run() {
  std::unique_lock lock(mu_);
  while (!abandon_.load()) {
    if (queue_.empty() || busy_) {
      if (stopping_ && queue_.empty() && !busy_) break;
      if (Clock::now() - last_submit_ < kIdleDeep && !stopping_) {
        worker_cv_.wait_for(lock, kIdlePoll);
        continue;
      }
      worker_idle_ = true;
      worker_cv_.wait(lock);
      worker_idle_ = false;
      continue;
    }
    std::shared_ptr<Op> op = queue_.front();
    if (!op->handed_off && !stopping_) {
      // Leave a fresh operation to its caller for a moment: if it waits now, it runs it itself.
      const auto due = op->queued_at + kGrace;
      if (Clock::now() < due) {
        worker_cv_.wait_until(lock, due);
        continue;
      }
    }
    busy_ = true;
    lock.unlock();
    const Outcome out = execute(*op, nullptr);
    lock.lock();
    busy_ = false;
    if (out == Outcome::Done) publish(*op);
    waiter_cv_.notify_all();
  }
  worker_done_ = true;
  waiter_cv_.notify_all();
  lock.unlock();
  free_comms();
}

void Channel::shutdown() {
  std::unique_lock lock(mu_);
  stopping_ = true;
  worker_cv_.notify_all();
  // After a failure the process is expected to end: do not make it wait a whole timeout again.
  const auto patience = broken_.empty() ? timeout_ : std::min(timeout_, kBrokenDrain);
  const bool drained =
      waiter_cv_.wait_for(lock, patience, [&] { return queue_.empty() && !busy_; });
  std::vector<std::shared_ptr<Op>> dropped;
  if (!drained) {
    // Peers may be waiting for this rank inside a collective: no MPI_Finalize from now on.
    add_unfinished(+1);
    abandon_.store(true);
    dropped.assign(queue_.begin(), queue_.end());
    worker_cv_.notify_all();
  }
  const bool exited =
      waiter_cv_.wait_for(lock, drained ? timeout_ : kStopGrace, [&] { return worker_done_; });
  lock.unlock();
  for (auto& op : dropped) {
    if (op->claim()) report(*op, false);
    op->abandoned.store(true);
  }
  waiter_cv_.notify_all();
  {
    std::lock_guard owner_lock(owner_mu_);
    owner_ = nullptr;
  }
  // A thread stuck inside a blocking MPI call cannot be joined; it keeps the channel alive.
  if (exited)
    worker_.join();
  else
    worker_.detach();
}

}  // namespace mpi_detail
}  // namespace shardlab
