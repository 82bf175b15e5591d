#include "engine/comm/mpi/communicator.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
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
// How long a timed-out receive may take to settle after MPI_Cancel.
constexpr auto kCancelGrace = milliseconds(100);
// While collectives keep coming, an idle progress thread looks at the queue this often instead of
// being woken by every submit; after kIdleDeep without any, it sleeps until woken.
constexpr auto kIdlePoll = milliseconds(2);
constexpr auto kIdleDeep = milliseconds(100);
// How long a destructor waits for the queue of a communicator that already failed (a healthy one
// gets the full timeout).
constexpr auto kBrokenDrain = milliseconds(1000);
// How long shutdown waits for an abandoned progress thread to leave its arrival gate.
constexpr auto kStopGrace = milliseconds(500);

std::atomic<int> g_unfinished{0};
std::atomic<int64_t> g_hot_spin_ns{0};

// split in a call signature (not a CommOp).
constexpr int64_t kSplitCode = 100;

bool mpi_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

std::string error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<size_t>(len));
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:  // the sum, divided afterwards
      return MPI_SUM;
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Min:
      return MPI_MIN;
  }
  return MPI_SUM;
}

void divide(std::span<float> data, int n) {
  const auto d = static_cast<float>(n);
  for (float& x : data) x /= d;  // as the reference computes it, so Avg is exact where Sum is
}

// Ranks whose calls disagree. Every rank reaches the same verdict and nothing was sent, so unlike
// other failures it leaves the communicator usable.
class CallsDisagree : public CommError {
  using CommError::CommError;
};

}  // namespace

int unfinished_operations() {
  return g_unfinished.load();
}
void add_unfinished(int delta) {
  g_unfinished += delta;
}

void throw_mpi_error(int code, const char* call, const char* file, int line) {
  std::string name(call);
  name.resize(std::min(name.size(), name.find('(')));
  throw CommError(fmt::format("{} failed: {}", name, error_string(code)),
                  detail::where(file, line, call));
}

void set_hot_spin(std::chrono::nanoseconds spin) {
  g_hot_spin_ns = spin.count();
}

void Backoff::pause() {
  using namespace std::chrono;
  const auto waited = steady_clock::now() - start_;
  // Hot: notice a completion within a poll or two (a yield costs about a microsecond here, which
  // measured as 2-3% of a 1 MiB all-reduce when paid in the arrival gate).
  if (waited.count() < g_hot_spin_ns.load(std::memory_order_relaxed)) return;
  if (waited < milliseconds(2)) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(
      std::clamp<nanoseconds>(waited / 50, microseconds(20), milliseconds(1)));
}

// What the ranks must agree on before a collective (-1 where a field does not apply).
struct Signature {
  static constexpr int kFields = 5;
  int64_t op = 0, count = 0, root = -1, reduce = -1, seq = -1;
};

// The arrival gate in front of every collective: an all-reduce (MPI_MAX over each field of the
// call's signature and of its negation, giving every field's max and min) done by hand with
// MPI_Isend/MPI_Irecv on a communicator of its own: one round of every rank to every other up to
// kDirectMax ranks, else ceil(log2 n) dissemination rounds. Once it opens every rank is committed
// to the same blocking collective, which then cannot wait for an absent rank; until then polling
// is bounded by the deadline. Point-to-point rather than MPI_Iallreduce or MPI_Ibarrier:
// measured, a libnbc gate slowed the following blocking collective by 5-25%.
class Gate {
 public:
  Gate() = default;
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  void start(MPI_Comm comm, int rank, int size, const Signature& s) {
    comm_ = comm;
    rank_ = rank;
    size_ = size;
    const int64_t v[k] = {s.op, s.count, s.root, s.reduce, s.seq};
    for (int i = 0; i < k; ++i) {
      acc_[i] = v[i];
      acc_[k + i] = -v[i];
    }
    open_ = size_ == 1;
    post();
  }

  // True once every rank has arrived.
  bool poll() {
    while (!open_) {
      int flag = 0;
      SL_MPI_CHECK(MPI_Testall(2 * peers_, req_, &flag, MPI_STATUSES_IGNORE));
      if (!flag) return false;
      // Max is idempotent, so the overlapping coverage of dissemination does no harm.
      for (int p = 0; p < peers_; ++p)
        for (int i = 0; i < 2 * k; ++i) acc_[i] = std::max(acc_[i], in_[p][i]);
      dist_ *= 2;
      open_ = size_ <= kDirectMax || dist_ >= size_;
      post();
    }
    return true;
  }

  // Gives up: the receives are cancelled, the (small, eager) sends left on their own.
  void cancel() {
    for (int i = 0; i < 2 * peers_; ++i) {
      if (req_[i] == MPI_REQUEST_NULL) continue;
      if (i % 2 == 0) MPI_Cancel(&req_[i]);
      MPI_Request_free(&req_[i]);
    }
  }

  // Throws CallsDisagree naming every field that differs.
  void verify(const std::string& what) const {
    static const char* const names[k] = {"operation", "element count", "root", "reduce op",
                                         "sequence number"};
    auto show = [](int field, int64_t x) -> std::string {
      if (x == -1 && field != 1) return "none";
      if (field == 0) return x == kSplitCode ? "split" : to_string(static_cast<CommOp>(x));
      if (field == 3) return to_string(static_cast<ReduceOp>(x));
      return std::to_string(x);
    };
    std::string diffs;
    for (int i = 0; i < k; ++i) {
      const int64_t hi = acc_[i], lo = -acc_[k + i];
      if (hi != lo)
        diffs += fmt::format("{}{} differs ({} on some ranks, {} on others)",
                             diffs.empty() ? "" : "; ", names[i], show(i, lo), show(i, hi));
    }
    if (!diffs.empty())
      throw CallsDisagree(
          fmt::format("{}: the ranks' calls disagree: {}; every rank of the group must issue the "
                      "same collectives, with the same counts, roots and reduce ops, in the same "
                      "order",
                      what, diffs),
          detail::where(__FILE__, __LINE__, nullptr));
  }

 private:
  static constexpr int k = Signature::kFields;
  static constexpr int kDirectMax = 8;

  void post() {
    if (open_) return;
    // Between two ranks at most one message per gate, so one tag keeps them in order.
    auto pair = [&](int slot, int dist) {
      SL_MPI_CHECK(MPI_Irecv(in_[slot], 2 * k, MPI_INT64_T, (rank_ - dist + size_) % size_, 0,
                             comm_, &req_[2 * slot]));
      SL_MPI_CHECK(MPI_Isend(acc_, 2 * k, MPI_INT64_T, (rank_ + dist) % size_, 0, comm_,
                             &req_[2 * slot + 1]));
    };
    peers_ = size_ <= kDirectMax ? size_ - 1 : 1;
    if (size_ <= kDirectMax)
      for (int d = 1; d < size_; ++d) pair(d - 1, d);
    else
      pair(0, dist_);
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, dist_ = 1, peers_ = 0;
  bool open_ = false;
  int64_t acc_[2 * k] = {};
  int64_t in_[kDirectMax - 1][2 * k] = {};
  MPI_Request req_[2 * (kDirectMax - 1)] = {};
};

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
  milliseconds timeout() const { return timeout_; }

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
  milliseconds timeout_{60000};
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

namespace {

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

// A posted MPI_Isend or MPI_Irecv, polled with MPI_Test by whoever waits.
class P2pWork final : public Work {
 public:
  // expected: the receive's count; -1 for a send.
  P2pWork(std::shared_ptr<Channel> channel, std::shared_ptr<Op> op, MPI_Request request,
          int expected)
      : ch_(std::move(channel)), op_(std::move(op)), req_(request), expected_(expected) {}

  ~P2pWork() override {
    if (finished_ || req_ == MPI_REQUEST_NULL || mpi_finalized()) return;
    // Dropped without wait(): the buffer is about to go. Cancel a receive that has not matched,
    // give a transfer under way a moment to finish, then let MPI retire the request.
    if (expected_ >= 0) MPI_Cancel(&req_);
    const auto until = Clock::now() + kCancelGrace;
    Backoff backoff;
    int flag = 0;
    for (;;) {
      const int rc = MPI_Test(&req_, &flag, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) break;  // completed in error, and not freed by MPI_Test
      if (flag) break;
      if (Clock::now() >= until) {
        add_unfinished(+1);  // still inside MPI: MPI_Finalize could wait for it forever
        break;
      }
      backoff.pause();
    }
    if (req_ != MPI_REQUEST_NULL) MPI_Request_free(&req_);
    if (op_->claim()) ch_->report(*op_, false);
  }

  void wait() override {
    std::unique_lock lock(mu_);
    if (!poll()) {
      const auto deadline = Clock::now() + ch_->timeout();
      Backoff backoff;
      while (!poll()) {
        if (Clock::now() >= deadline) {
          give_up();
          break;
        }
        backoff.pause();
      }
    }
    if (error_) std::rethrow_exception(error_);
  }

  bool done() override {
    // Never blocks: if another thread is inside wait(), report what is known.
    std::unique_lock lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) return finished_.load(std::memory_order_acquire);
    return poll();
  }

 private:
  bool recv() const { return expected_ >= 0; }

  // mu_ held. True once the operation has finished, well or not.
  bool poll() {
    if (finished_.load(std::memory_order_relaxed)) return true;
    int flag = 0;
    MPI_Status status;
    const int rc = MPI_Test(&req_, &flag, &status);
    if (rc != MPI_SUCCESS) {
      fail_with_code(rc);
      return true;
    }
    if (!flag) return false;
    complete(status);
    return true;
  }

  void complete(const MPI_Status& status) {
    if (recv()) {
      int got = 0;
      MPI_Get_count(&status, MPI_FLOAT, &got);
      if (got != expected_) {
        fail(CommError(
            fmt::format("{}: this rank expects {} floats but rank {} sent {}; sender and receiver "
                        "must pass the same count",
                        op_->what, expected_, op_->record.peer, got),
            detail::where(__FILE__, __LINE__, nullptr)));
        return;
      }
    }
    finish(true);
  }

  void fail_with_code(int rc) {
    // A request that completed in error is not freed by MPI_Test.
    if (req_ != MPI_REQUEST_NULL) MPI_Request_free(&req_);
    int cls = 0;
    MPI_Error_class(rc, &cls);
    std::string msg;
    if (cls == MPI_ERR_TRUNCATE && recv())
      msg = fmt::format(
          "{}: rank {} sent more than the {} floats this rank expects ({}); sender and receiver "
          "must pass the same count",
          op_->what, op_->record.peer, expected_, error_string(rc));
    else
      msg = fmt::format("{}: MPI_Test failed: {}", op_->what, error_string(rc));
    // A truncated message was consumed whole; anything else leaves MPI in doubt.
    if (cls != MPI_ERR_TRUNCATE) ch_->mark_broken(op_->what + " failed");
    fail(CommError(msg, detail::where(__FILE__, __LINE__, nullptr)));
  }

  // The deadline passed. A receive that is not matched yet can be cancelled, so nothing writes
  // its buffer later; a send cannot, and stays inside MPI.
  void give_up() {
    bool settled = false;
    if (recv() && MPI_Cancel(&req_) == MPI_SUCCESS) {
      const auto until = Clock::now() + kCancelGrace;
      Backoff backoff;
      while (Clock::now() < until) {
        int flag = 0, cancelled = 0;
        MPI_Status status;
        if (MPI_Test(&req_, &flag, &status) != MPI_SUCCESS) {
          if (req_ != MPI_REQUEST_NULL) MPI_Request_free(&req_);
          settled = true;
          break;
        }
        if (flag) {
          MPI_Test_cancelled(&status, &cancelled);
          if (!cancelled) return complete(status);  // it arrived after all
          settled = true;
          break;
        }
        backoff.pause();
      }
    }
    if (!settled) add_unfinished(+1);  // MPI_Finalize would wait for this request forever
    ch_->mark_broken(op_->what + " timed out");
    const std::string liveness = probe_liveness(liveness_window(ch_->timeout()));
    fail(TimeoutError(
        fmt::format("{} timed out after {} ms on rank {} of {}: rank {} did not post the matching "
                    "{} in time ({}); this communicator is now unusable and the process should "
                    "end",
                    op_->what, ch_->timeout().count(), ch_->rank(), ch_->size(), op_->record.peer,
                    recv() ? "send" : "receive",
                    liveness.empty() ? "the mpi backend cannot tell whether it is late, has "
                                       "failed or waits on something else"
                                     : liveness),
        detail::where(__FILE__, __LINE__, nullptr)));
  }

  template <typename E>
  void fail(E error) {
    error_ = std::make_exception_ptr(std::move(error));
    finish(false);
  }
  void finish(bool ok) {
    if (op_->claim()) {
      if (ok)
        ch_->report(*op_, true);
      else
        error_ = ch_->report_failure(*op_, error_);
    }
    finished_.store(true, std::memory_order_release);
  }

  std::shared_ptr<Channel> ch_;
  std::shared_ptr<Op> op_;
  std::mutex mu_;
  MPI_Request req_;
  const int expected_;
  std::atomic<bool> finished_{false};
  std::exception_ptr error_;
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

std::unique_ptr<Communicator> adopt(MPI_Comm comm, MPI_Comm gate_comm, std::string name,
                                    CommOptions options) {
  auto channel = std::make_shared<Channel>(comm, gate_comm);
  return std::make_unique<MpiCommunicator>(std::move(channel), std::move(name), std::move(options));
}

}  // namespace mpi_detail

using mpi_detail::Op;
using mpi_detail::Signature;

namespace {

std::shared_ptr<Op> new_op(const CommRecord& record, std::string what) {
  auto op = std::make_shared<Op>();
  op->record = record;
  op->what = std::move(what);
  return op;
}

// MPI counts and displacements are ints.
int mpi_count(size_t n, const Op& op) {
  SL_ENFORCE(n <= static_cast<size_t>(INT_MAX),
             "{}: {} elements are more than MPI's int counts can address ({}); split the buffer",
             op.what, n, INT_MAX);
  return static_cast<int>(n);
}

Signature signature(const CommRecord& record, int64_t count, int root, ReduceOp reduce) {
  Signature s;
  s.op = static_cast<int64_t>(record.op);
  s.count = count;
  if (record.op == CommOp::Broadcast) s.root = root;
  if (record.op == CommOp::AllReduce || record.op == CommOp::ReduceScatter)
    s.reduce = static_cast<int64_t>(reduce);
  s.seq = static_cast<int64_t>(record.seq);
  return s;
}

// Per-rank counts and displacements of chunk_range(total, n, r).
void chunks(int64_t total, int n, std::vector<int>& counts, std::vector<int>& displs) {
  counts.resize(static_cast<size_t>(n));
  displs.resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const IndexRange c = chunk_range(total, n, r);
    counts[static_cast<size_t>(r)] = static_cast<int>(c.size());
    displs[static_cast<size_t>(r)] = static_cast<int>(c.begin);
  }
}

}  // namespace

MpiCommunicator::MpiCommunicator(std::shared_ptr<mpi_detail::Channel> channel, std::string name,
                                 CommOptions options)
    : Communicator(channel->rank(), channel->size(), std::move(name), std::move(options)),
      channel_(std::move(channel)) {
  channel_->start(this);
}

MpiCommunicator::~MpiCommunicator() {
  channel_->shutdown();
}

WorkHandle MpiCommunicator::do_all_reduce(std::span<float> data, const Call& call) {
  auto op = new_op(call.record, call.describe());
  const int count = mpi_count(data.size(), *op);
  op->sig = signature(call.record, count, 0, call.reduce);
  op->data = data;
  op->body = [comm = channel_->comm(), count, reduce = call.reduce, n = size()](Op& o) {
    SL_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, o.data.data(), count, MPI_FLOAT,
                               mpi_detail::mpi_op(reduce), comm));
    if (reduce == ReduceOp::Avg) mpi_detail::divide(o.data, n);
  };
  return channel_->submit(std::move(op));
}

WorkHandle MpiCommunicator::do_reduce_scatter(std::span<const float> input, std::span<float> output,
                                              const Call& call) {
  auto op = new_op(call.record, call.describe());
  const int total = mpi_count(input.size(), *op);
  std::vector<int> counts, displs;
  chunks(total, size(), counts, displs);
  op->sig = signature(call.record, total, 0, call.reduce);
  op->input = input;
  op->output = output;
  op->body = [comm = channel_->comm(), counts = std::move(counts), reduce = call.reduce,
              n = size()](Op& o) {
    SL_MPI_CHECK(MPI_Reduce_scatter(o.input.data(), o.output.data(), counts.data(), MPI_FLOAT,
                                    mpi_detail::mpi_op(reduce), comm));
    if (reduce == ReduceOp::Avg) mpi_detail::divide(o.output, n);
  };
  return channel_->submit(std::move(op));
}

WorkHandle MpiCommunicator::do_all_gather(std::span<const float> input, std::span<float> output,
                                          const Call& call) {
  auto op = new_op(call.record, call.describe());
  const int total = mpi_count(output.size(), *op);
  std::vector<int> counts, displs;
  chunks(total, size(), counts, displs);
  op->sig = signature(call.record, total, 0, ReduceOp::Sum);
  op->input = input;
  op->output = output;
  op->body = [comm = channel_->comm(), counts = std::move(counts),
              displs = std::move(displs)](Op& o) {
    SL_MPI_CHECK(MPI_Allgatherv(o.input.data(), static_cast<int>(o.input.size()), MPI_FLOAT,
                                o.output.data(), counts.data(), displs.data(), MPI_FLOAT, comm));
  };
  return channel_->submit(std::move(op));
}

WorkHandle MpiCommunicator::do_broadcast(std::span<float> data, const Call& call) {
  auto op = new_op(call.record, call.describe());
  const int count = mpi_count(data.size(), *op);
  op->sig = signature(call.record, count, call.root, ReduceOp::Sum);
  op->data = data;
  op->body = [comm = channel_->comm(), count, root = call.root](Op& o) {
    SL_MPI_CHECK(MPI_Bcast(o.data.data(), count, MPI_FLOAT, root, comm));
  };
  return channel_->submit(std::move(op));
}

WorkHandle MpiCommunicator::do_barrier(const Call& call) {
  auto op = new_op(call.record, call.describe());
  op->sig = signature(call.record, 0, 0, ReduceOp::Sum);
  // Every rank has arrived once the gate opens: that is the barrier.
  op->body = [](Op&) {};
  return channel_->submit(std::move(op));
}

WorkHandle MpiCommunicator::do_send(std::span<const float> data, const Call& call) {
  auto op = new_op(call.record, fmt::format("{} to rank {} (tag {})", call.describe(),
                                            call.record.peer, call.record.tag));
  const int count = mpi_count(data.size(), *op);
  SL_ENFORCE(call.record.tag <= channel_->tag_ub(), "{}: the tag is above MPI_TAG_UB ({})",
             op->what, channel_->tag_ub());
  channel_->ensure_usable(*op);
  MPI_Request req = MPI_REQUEST_NULL;
  const int rc = MPI_Isend(data.data(), count, MPI_FLOAT, call.record.peer, call.record.tag,
                           channel_->comm(), &req);
  if (rc != MPI_SUCCESS) {
    if (op->claim()) channel_->report(*op, false);
    SL_THROW(CommError, "{}: MPI_Isend failed: {}", op->what, mpi_detail::error_string(rc));
  }
  return std::make_shared<mpi_detail::P2pWork>(channel_, std::move(op), req, -1);
}

WorkHandle MpiCommunicator::do_recv(std::span<float> data, const Call& call) {
  auto op = new_op(call.record, fmt::format("{} from rank {} (tag {})", call.describe(),
                                            call.record.peer, call.record.tag));
  const int count = mpi_count(data.size(), *op);
  SL_ENFORCE(call.record.tag <= channel_->tag_ub(), "{}: the tag is above MPI_TAG_UB ({})",
             op->what, channel_->tag_ub());
  channel_->ensure_usable(*op);
  MPI_Request req = MPI_REQUEST_NULL;
  const int rc = MPI_Irecv(data.data(), count, MPI_FLOAT, call.record.peer, call.record.tag,
                           channel_->comm(), &req);
  if (rc != MPI_SUCCESS) {
    if (op->claim()) channel_->report(*op, false);
    SL_THROW(CommError, "{}: MPI_Irecv failed: {}", op->what, mpi_detail::error_string(rc));
  }
  return std::make_shared<mpi_detail::P2pWork>(channel_, std::move(op), req, count);
}

std::unique_ptr<Communicator> MpiCommunicator::do_split(int color, int key,
                                                        const std::string& name) {
  // A collective on this communicator, so it goes through the queue and the gate like the others
  // (no CommOp, so no record). The gate's twin is made right after, while every member is
  // known to be there.
  auto op = std::make_shared<Op>();
  op->has_record = false;
  op->what = fmt::format("split of group {} into {}", this->name(), name);
  op->sig.op = mpi_detail::kSplitCode;
  struct Result {
    MPI_Comm comm = MPI_COMM_NULL, gate = MPI_COMM_NULL;
  };
  auto result = std::make_shared<Result>();
  op->body = [comm = channel_->comm(), result, color = color < 0 ? MPI_UNDEFINED : color,
              key](Op&) {
    SL_MPI_CHECK(MPI_Comm_split(comm, color, key, &result->comm));
    if (result->comm != MPI_COMM_NULL) SL_MPI_CHECK(MPI_Comm_dup(result->comm, &result->gate));
  };
  channel_->submit(op)->wait();
  if (result->comm == MPI_COMM_NULL) return nullptr;
  return mpi_detail::adopt(result->comm, result->gate, name, options());
}

}  // namespace shardlab
