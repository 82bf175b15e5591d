// Send and recv of MpiCommunicator: an MPI_Isend or MPI_Irecv posted by the calling thread (never
// queued behind collectives) and P2pWork, its Work handle, polled with MPI_Test by whoever waits.
#include <atomic>
#include <exception>
#include <mutex>
#include <string>

#include "engine/comm/mpi/channel.h"
#include "engine/comm/mpi/communicator.h"
#include "engine/comm/mpi/liveness.h"
#include "engine/comm/mpi/mpi_util.h"

namespace shardlab {
namespace mpi_detail {
namespace {

// How long a timed-out receive may take to settle after MPI_Cancel.
constexpr auto kCancelGrace = std::chrono::milliseconds(100);

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

// The shared start of a send and a receive: the operation's record and checks, then `post`
// (MPI_Isend or MPI_Irecv, named `mpi_call`, given the element count). A receive's work checks
// the count that arrived against its own.
template <class Post>
WorkHandle start_p2p(const std::shared_ptr<Channel>& channel, const CommRecord& record,
                     std::string what, size_t n, bool receive, const char* mpi_call, Post post) {
  auto op = new_op(record, std::move(what));
  const int count = mpi_count(n, *op);
  SL_ENFORCE(record.tag <= channel->tag_ub(), "{}: the tag is above MPI_TAG_UB ({})", op->what,
             channel->tag_ub());
  channel->ensure_usable(*op);
  MPI_Request req = MPI_REQUEST_NULL;
  const int rc = post(count, &req);
  if (rc != MPI_SUCCESS) {
    if (op->claim()) channel->report(*op, false);
    SL_THROW(CommError, "{}: {} failed: {}", op->what, mpi_call, error_string(rc));
  }
  return std::make_shared<P2pWork>(channel, std::move(op), req, receive ? count : -1);
}

}  // namespace
}  // namespace mpi_detail

WorkHandle MpiCommunicator::do_send(std::span<const float> data, const Call& call) {
  const CommRecord& r = call.record;
  return mpi_detail::start_p2p(
      channel_, r, fmt::format("{} to rank {} (tag {})", call.describe(), r.peer, r.tag),
      data.size(), false, "MPI_Isend", [&](int count, MPI_Request* req) {
        return MPI_Isend(data.data(), count, MPI_FLOAT, r.peer, r.tag, channel_->comm(), req);
      });
}

WorkHandle MpiCommunicator::do_recv(std::span<float> data, const Call& call) {
  const CommRecord& r = call.record;
  return mpi_detail::start_p2p(
      channel_, r, fmt::format("{} from rank {} (tag {})", call.describe(), r.peer, r.tag),
      data.size(), true, "MPI_Irecv", [&](int count, MPI_Request* req) {
        return MPI_Irecv(data.data(), count, MPI_FLOAT, r.peer, r.tag, channel_->comm(), req);
      });
}

}  // namespace shardlab
