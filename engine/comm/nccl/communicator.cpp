#include "engine/comm/nccl/communicator.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "engine/comm/nccl/nccl_detail.h"

// ncclCommSplit arrived in 2.18; non-blocking communicators (2.14) and ncclAvg (2.10) before it.
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error "the nccl backend needs NCCL >= 2.18 (ncclCommSplit)"
#endif

namespace shardlab {
namespace {

using nccl_detail::Backoff;
using nccl_detail::DeviceGuard;
using nccl_detail::nccl_last_error;

ncclRedOp_t to_nccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Avg:
      return ncclAvg;
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Min:
      return ncclMin;
  }
  SL_THROW(InternalError, "unknown reduce op {}", static_cast<int>(op));
}

template <class E>
std::exception_ptr make_error(const std::string& message) {
  return std::make_exception_ptr(E(message, detail::where(__FILE__, __LINE__, nullptr)));
}

// The communicator's rank and size, asked of NCCL before the base class is built; a failure aborts
// `comm`, which the constructor owns from the start.
int query_or_abort(ncclComm_t comm, ncclResult_t (*query)(const ncclComm_t, int*),
                   const char* what) {
  int value = 0;
  const ncclResult_t rc = query(comm, &value);
  if (rc != ncclSuccess) {
    (void)ncclCommAbort(comm);
    nccl_detail::check_nccl(rc, what, __FILE__, __LINE__);
  }
  return value;
}

}  // namespace

// One operation: its completion event and its record. Observed complete (and its record emitted)
// by wait(), done(), the communicator's reap() or, when the communicator aborts or is destroyed,
// by settle_before_abort(). Once settled it never touches the communicator again, so a handle may
// outlive it.
class NcclCommunicator::Op final : public Work {
 public:
  Op(NcclCommunicator* owner, cudaEvent_t event, Call call)
      : owner_(owner), event_(event), call_(std::move(call)) {}
  ~Op() override { release_event(); }
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

  void wait() override {
    if (!settled_) {
      DeviceGuard guard(owner_->device_);
      const auto deadline = Clock::now() + owner_->options().timeout;
      Backoff backoff;
      while (!poll()) {
        if (Clock::now() >= deadline) {
          time_out();
          break;
        }
        backoff.pause();
      }
    }
    if (error_) std::rethrow_exception(error_);
  }

  bool done() override {
    if (!settled_) {
      DeviceGuard guard(owner_->device_);
      poll();
    }
    return settled_;
  }

  // One look, never blocking (the owner's GPU must be current): true once settled.
  bool poll() {
    if (settled_) return true;
    if (owner_->aborted_) {  // settle_before_abort() normally got here first
      finish(make_error<CommError>(aborted_message(owner_->abort_reason_)));
      return true;
    }
    const cudaError_t status = cudaEventQuery(event_);
    if (status == cudaSuccess) {
      owner_->complete_through(this);
      return true;
    }
    if (status != cudaErrorNotReady) {
      (void)cudaGetLastError();
      fail_and_abort(fmt::format("{} on rank {} of {}: the CUDA stream failed: {}",
                                 call_.describe(), owner_->rank(), owner_->size(),
                                 cuda_error_text(status)));
      return true;
    }
    // Still running. A peer that died or a network failure shows up here, not in the event.
    ncclResult_t state = ncclSuccess;
    const ncclResult_t rc = ncclCommGetAsyncError(owner_->comm_, &state);
    if (rc != ncclSuccess) state = rc;
    if (state != ncclSuccess && state != ncclInProgress) {
      fail_and_abort(fmt::format("{} on rank {} of {}: NCCL reported {}{}", call_.describe(),
                                 owner_->rank(), owner_->size(), ncclGetErrorString(state),
                                 nccl_last_error(owner_->comm_)));
      return true;
    }
    return false;
  }

  bool settled() const { return settled_; }

  // Marks the operation complete (its event, or a later one on the same stream, has fired).
  void complete() {
    if (!settled_) finish(nullptr);
  }

  // The owner is about to abort NCCL (after `reason`): an operation whose event has completed did
  // complete; any other will never produce a result.
  void settle_before_abort(const std::string& reason) {
    if (settled_) return;
    if (cudaEventQuery(event_) == cudaSuccess)
      finish(nullptr);
    else
      finish(make_error<CommError>(aborted_message(reason)));
  }

 private:
  std::string aborted_message(const std::string& reason) const {
    return fmt::format("{} on rank {} did not complete: the communicator was aborted. Cause: {}",
                       call_.describe(), call_.record.rank, reason);
  }

  void fail_and_abort(const std::string& message) {
    auto error = make_error<CommError>(message + "; the communicator was aborted");
    owner_->abort_comm(message, this);
    finish(error);
  }

  void time_out() {
    const std::string message = owner_->timeout_message(call_, "waiting for it to complete");
    owner_->abort_comm(message, this);
    finish(make_error<TimeoutError>(message));
  }

  void finish(std::exception_ptr error) {
    settled_ = true;
    error_ = std::move(error);
    release_event();
    // A failure goes through report_failure: the flight record is written (flight_dir) and the
    // error names it.
    if (error_)
      error_ = owner_->report_failure(call_.record, error_);
    else
      owner_->report(call_.record, true);
    owner_ = nullptr;  // settled: the communicator is never needed again
  }

  void release_event() {
    if (event_) (void)cudaEventDestroy(event_);
    event_ = nullptr;
  }

  NcclCommunicator* owner_;
  cudaEvent_t event_;
  Call call_;
  bool settled_ = false;
  std::exception_ptr error_;
};

NcclCommunicator::NcclCommunicator(ncclComm_t comm, int device, std::string name,
                                   CommOptions options)
    : Communicator(query_or_abort(comm, ncclCommUserRank, "ncclCommUserRank"),
                   query_or_abort(comm, ncclCommCount, "ncclCommCount"), std::move(name),
                   std::move(options)),
      comm_(comm),
      device_(device) {
  try {
    DeviceGuard guard(device_);
    SL_NCCL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SL_NCCL_CUDA_CHECK(cudaEventCreateWithFlags(&inputs_ready_, cudaEventDisableTiming));
    SL_NCCL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&barrier_word_), sizeof(float)));
    SL_NCCL_CUDA_CHECK(cudaMemsetAsync(barrier_word_, 0, sizeof(float), stream_));
  } catch (...) {
    if (barrier_word_) (void)cudaFree(barrier_word_);
    if (inputs_ready_) (void)cudaEventDestroy(inputs_ready_);
    if (stream_) (void)cudaStreamDestroy(stream_);
    (void)ncclCommAbort(comm_);
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() {
  // Never throws: CUDA/NCCL failures here only decide between a clean finalize and an abort.
  int previous = device_;
  (void)cudaGetDevice(&previous);
  (void)cudaSetDevice(device_);
  try {
    // Let queued operations finish, bounded, so their handles report what really happened.
    auto deadline = Clock::now() + options().timeout;
    Backoff backoff;
    while (!aborted_ && !in_flight_.empty()) {
      reap();
      if (in_flight_.empty() || aborted_) break;
      if (Clock::now() >= deadline) {
        abort_comm(fmt::format("group {} was destroyed on rank {} while operations were still "
                               "running after {} ms",
                               name(), rank(), options().timeout.count()),
                   nullptr);
        break;
      }
      backoff.pause();
    }
    if (!aborted_) {
      // Finalize waits for the other ranks on this node to finalize too; past the deadline the
      // communicator is aborted instead, which waits for nobody.
      deadline = Clock::now() + options().timeout;
      bool finalized = false;
      try {
        SL_NCCL_CHECK(ncclCommFinalize(comm_));
        finalized = nccl_detail::poll_ready(comm_, deadline, "ncclCommFinalize");
      } catch (const std::exception&) {
        finalized = false;
      }
      if (finalized)
        (void)ncclCommDestroy(comm_);
      else
        (void)ncclCommAbort(comm_);
      comm_ = nullptr;
    }
  } catch (...) {
    if (comm_) (void)ncclCommAbort(comm_);
    comm_ = nullptr;
  }
  // The stream is idle or NCCL aborted its kernels, so the buffers are free to go.
  for (float* buffer : outgrown_) (void)cudaFree(buffer);
  if (scratch_) (void)cudaFree(scratch_);
  if (barrier_word_) (void)cudaFree(barrier_word_);
  if (inputs_ready_) (void)cudaEventDestroy(inputs_ready_);
  if (stream_) (void)cudaStreamDestroy(stream_);
  (void)cudaSetDevice(previous);
}

void NcclCommunicator::reap() {
  // Operations complete in issue order, so the first one still running ends the sweep. A poll()
  // that returns true has removed its operation (complete_through) or emptied the queue (abort).
  while (!in_flight_.empty()) {
    std::shared_ptr<Op> front = in_flight_.front();
    if (front->settled()) {
      in_flight_.pop_front();
      continue;
    }
    if (!front->poll()) break;
  }
}

void NcclCommunicator::complete_through(Op* op) {
  // One stream runs every operation in issue order, so when `op` has completed so has everything
  // queued before it: settle those first, so records come out in issue order.
  const bool queued = std::any_of(in_flight_.begin(), in_flight_.end(),
                                  [op](const std::shared_ptr<Op>& q) { return q.get() == op; });
  while (queued && !in_flight_.empty()) {
    std::shared_ptr<Op> front = in_flight_.front();  // keeps it alive if the queue held the last
    in_flight_.pop_front();
    front->complete();
    if (front.get() == op) return;
  }
  op->complete();
}

void NcclCommunicator::abort_comm(const std::string& reason, const Op* culprit) {
  if (aborted_) return;
  aborted_ = true;
  abort_reason_ = reason;
  // Settle first: an operation whose event completed before the abort did complete.
  for (const auto& op : in_flight_)
    if (op.get() != culprit) op->settle_before_abort(reason);
  in_flight_.clear();
  (void)ncclCommAbort(comm_);
  comm_ = nullptr;
}

std::string NcclCommunicator::timeout_message(const Call& call, const char* phase) const {
  return fmt::format(
      "{} timed out after {} ms on rank {} of {} (GPU {}), {}. NCCL cannot tell which ranks are "
      "missing: a peer may have crashed, stalled, or issued a different operation. The "
      "communicator was aborted and cannot be used again.",
      call.describe(), options().timeout.count(), rank(), size(), device_, phase);
}

void NcclCommunicator::settle(ncclResult_t rc, const char* what, const Call& call,
                              Clock::time_point deadline) {
  if (rc != ncclSuccess && rc != ncclInProgress)
    SL_THROW(CommError, "{} on rank {} of {}: {} failed: {}{}", call.describe(), rank(), size(),
             what, ncclGetErrorString(rc), nccl_last_error(comm_));
  const std::string context = fmt::format("{} on rank {} of {}", call.describe(), rank(), size());
  if (!nccl_detail::poll_ready(comm_, deadline, context))
    SL_THROW(TimeoutError, "{}",
             timeout_message(call, "while NCCL was accepting it (connecting to its peers)"));
}

void NcclCommunicator::check_device_buffer(const void* data, size_t count, const Call& call,
                                           const char* which) const {
  if (count == 0) return;
  cudaPointerAttributes attributes{};
  const cudaError_t err = cudaPointerGetAttributes(&attributes, data);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    SL_THROW(InvalidArgument, "{} on rank {}: cannot inspect the {} buffer: {}", call.describe(),
             rank(), which, cuda_error_text(err));
  }
  if (attributes.type == cudaMemoryTypeManaged) return;
  SL_ENFORCE(attributes.type == cudaMemoryTypeDevice && attributes.device == device_,
             "{} on rank {}: the {} buffer must be device memory on GPU {} (the nccl backend takes "
             "device pointers), but it is {}",
             call.describe(), rank(), which, device_,
             attributes.type == cudaMemoryTypeDevice
                 ? fmt::format("memory on GPU {}", attributes.device)
                 : std::string("host memory"));
}

float* NcclCommunicator::scratch(int64_t count) {
  if (count <= scratch_count_) return scratch_;
  const int64_t grown = std::max(count, 2 * scratch_count_);
  const size_t bytes = static_cast<size_t>(grown) * sizeof(float);
  float* fresh = nullptr;
  SL_NCCL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&fresh), bytes));
  // Zeroed once so that pad slots never hold uninitialised memory (NCCL reduces them too; their
  // results are dropped).
  SL_NCCL_CUDA_CHECK(cudaMemsetAsync(fresh, 0, bytes, stream_));
  if (scratch_) outgrown_.push_back(scratch_);
  scratch_ = fresh;
  scratch_count_ = grown;
  return scratch_;
}

void NcclCommunicator::copy(float* dst, const float* src, int64_t count) {
  if (count <= 0) return;
  SL_NCCL_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(count) * sizeof(float),
                                     cudaMemcpyDeviceToDevice, stream_));
}

template <class Enqueue>
WorkHandle NcclCommunicator::launch(const Call& call, Enqueue&& enqueue) {
  cudaEvent_t done = nullptr;
  std::shared_ptr<Op> op;
  try {
    DeviceGuard guard(device_);
    reap();
    if (aborted_)
      SL_THROW(CommError,
               "{} on rank {} of {}: the communicator was aborted earlier ({}); make a "
               "new one",
               call.describe(), rank(), size(), abort_reason_);
    const auto deadline = Clock::now() + options().timeout;
    // Data written on the compute stream before this call must be complete when NCCL reads it;
    // the wait happens on the GPU, the host does not block.
    SL_NCCL_CUDA_CHECK(cudaEventRecord(inputs_ready_, compute_stream_));
    SL_NCCL_CUDA_CHECK(cudaStreamWaitEvent(stream_, inputs_ready_, 0));
    enqueue(deadline);
    SL_NCCL_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    SL_NCCL_CUDA_CHECK(cudaEventRecord(done, stream_));
    op = std::make_shared<Op>(this, done, call);
    done = nullptr;  // owned by op
  } catch (const std::exception& e) {
    if (done) (void)cudaEventDestroy(done);
    // Part of the operation may be queued and peers may be waiting on it: nothing short of an
    // abort leaves NCCL in a known state.
    abort_comm(e.what(), nullptr);
    std::rethrow_exception(report_failure(call.record, std::current_exception()));
  }
  in_flight_.push_back(op);
  return op;
}

WorkHandle NcclCommunicator::do_all_reduce(std::span<float> data, const Call& call) {
  check_device_buffer(data.data(), data.size(), call, "data");
  return launch(call, [&](Clock::time_point deadline) {
    if (data.empty()) return;
    settle(ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, to_nccl(call.reduce),
                         comm_, stream_),
           "ncclAllReduce", call, deadline);
  });
}

// NCCL's reduce-scatter and all-gather move equal chunks; chunk_range() gives the first total % n
// chunks one element more. Uneven arrays therefore go through scratch laid out in n slots of
// ceil(total / n) elements, chunk r in slot r. The first total % n chunks fill their slots exactly
// and sit at the same offsets in both layouts, so they move as one block; the rest move one by
// one, each leaving its slot's last element as padding.
WorkHandle NcclCommunicator::do_reduce_scatter(std::span<const float> input,
                                               std::span<float> output, const Call& call) {
  check_device_buffer(input.data(), input.size(), call, "input");
  check_device_buffer(output.data(), output.size(), call, "output");
  return launch(call, [&](Clock::time_point deadline) {
    const auto total = static_cast<int64_t>(input.size());
    const int n = size();
    if (total == 0) return;
    if (total % n == 0) {
      settle(ncclReduceScatter(input.data(), output.data(), static_cast<size_t>(total / n),
                               ncclFloat32, to_nccl(call.reduce), comm_, stream_),
             "ncclReduceScatter", call, deadline);
      return;
    }
    const int64_t slot = total / n + 1, extra = total % n;
    float* padded = scratch(slot * n);
    copy(padded, input.data(), extra * slot);
    for (int r = static_cast<int>(extra); r < n; ++r) {
      const IndexRange chunk = chunk_range(total, n, r);
      copy(padded + r * slot, input.data() + chunk.begin, chunk.size());
    }
    // In place: NCCL leaves rank r's reduced slot where its input slot was.
    float* mine = padded + rank() * slot;
    settle(ncclReduceScatter(padded, mine, static_cast<size_t>(slot), ncclFloat32,
                             to_nccl(call.reduce), comm_, stream_),
           "ncclReduceScatter", call, deadline);
    copy(output.data(), mine, static_cast<int64_t>(output.size()));
  });
}

WorkHandle NcclCommunicator::do_all_gather(std::span<const float> input, std::span<float> output,
                                           const Call& call) {
  check_device_buffer(input.data(), input.size(), call, "input");
  check_device_buffer(output.data(), output.size(), call, "output");
  return launch(call, [&](Clock::time_point deadline) {
    const auto total = static_cast<int64_t>(output.size());
    const int n = size();
    if (total == 0) return;
    if (total % n == 0) {
      settle(ncclAllGather(input.data(), output.data(), static_cast<size_t>(total / n), ncclFloat32,
                           comm_, stream_),
             "ncclAllGather", call, deadline);
      return;
    }
    const int64_t slot = total / n + 1, extra = total % n;
    float* padded = scratch(slot * n);
    // In place: this rank's chunk goes into its own slot.
    float* mine = padded + rank() * slot;
    copy(mine, input.data(), static_cast<int64_t>(input.size()));
    settle(ncclAllGather(mine, padded, static_cast<size_t>(slot), ncclFloat32, comm_, stream_),
           "ncclAllGather", call, deadline);
    copy(output.data(), padded, extra * slot);
    for (int r = static_cast<int>(extra); r < n; ++r) {
      const IndexRange chunk = chunk_range(total, n, r);
      copy(output.data() + chunk.begin, padded + r * slot, chunk.size());
    }
  });
}

WorkHandle NcclCommunicator::do_broadcast(std::span<float> data, const Call& call) {
  check_device_buffer(data.data(), data.size(), call, "data");
  return launch(call, [&](Clock::time_point deadline) {
    if (data.empty()) return;
    settle(ncclBroadcast(data.data(), data.data(), data.size(), ncclFloat32, call.root, comm_,
                         stream_),
           "ncclBroadcast", call, deadline);
  });
}

WorkHandle NcclCommunicator::do_barrier(const Call& call) {
  // A one-float all-reduce: it completes on a rank only once every rank has joined. Max keeps the
  // word at 0 however many barriers run.
  return launch(call, [&](Clock::time_point deadline) {
    settle(ncclAllReduce(barrier_word_, barrier_word_, 1, ncclFloat32, ncclMax, comm_, stream_),
           "ncclAllReduce", call, deadline);
  });
}

WorkHandle NcclCommunicator::do_send(std::span<const float> data, const Call& call) {
  check_device_buffer(data.data(), data.size(), call, "data");
  // Counts must agree between the pair, so both sides skip an empty message.
  return launch(call, [&](Clock::time_point deadline) {
    if (data.empty()) return;
    settle(ncclSend(data.data(), data.size(), ncclFloat32, call.record.peer, comm_, stream_),
           "ncclSend", call, deadline);
  });
}

WorkHandle NcclCommunicator::do_recv(std::span<float> data, const Call& call) {
  check_device_buffer(data.data(), data.size(), call, "data");
  return launch(call, [&](Clock::time_point deadline) {
    if (data.empty()) return;
    settle(ncclRecv(data.data(), data.size(), ncclFloat32, call.record.peer, comm_, stream_),
           "ncclRecv", call, deadline);
  });
}

std::unique_ptr<Communicator> NcclCommunicator::do_split(int color, int key,
                                                         const std::string& name) {
  const std::string what =
      fmt::format("split of group {} into {} on rank {} of {}", this->name(), name, rank(), size());
  DeviceGuard guard(device_);
  reap();  // may find a failed operation and abort
  if (aborted_)
    SL_THROW(CommError, "{}: the communicator was aborted earlier ({}); make a new one", what,
             abort_reason_);
  const auto deadline = Clock::now() + options().timeout;
  // NCCL's own thread stores the new handle when the split completes. The slot lives on the heap
  // so that a split abandoned at its deadline cannot write into a dead stack frame; only then is
  // it leaked (one pointer).
  auto slot = std::make_unique<ncclComm_t>(nullptr);
  try {
    // NCCL orders the new ranks by key, ties by old rank, as the interface asks.
    SL_NCCL_CHECK(ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, slot.get(),
                                nullptr));  // null config: inherit the parent's (non-blocking)
    if (!nccl_detail::poll_ready(comm_, deadline, what)) {
      (void)slot.release();
      SL_THROW(TimeoutError,
               "{} timed out after {} ms. NCCL cannot tell which ranks are missing: every rank of "
               "the group must call split. The communicator was aborted and cannot be used again.",
               what, options().timeout.count());
    }
    ncclComm_t child = *slot;
    if (color < 0) {
      if (child) (void)ncclCommDestroy(child);  // NCCL promises none; never leak one regardless
      return nullptr;
    }
    SL_ENFORCE_T(CommError, child != nullptr, "{}: NCCL returned no communicator", what);
    bool ready = false;
    try {
      ready = nccl_detail::poll_ready(child, deadline, what);
    } catch (...) {
      (void)ncclCommAbort(child);
      throw;
    }
    if (!ready) {
      (void)ncclCommAbort(child);
      SL_THROW(TimeoutError,
               "{} timed out after {} ms while NCCL set up the new group. NCCL cannot tell which "
               "ranks are missing. The communicator was aborted and cannot be used again.",
               what, options().timeout.count());
    }
    return std::make_unique<NcclCommunicator>(child, device_, name, options());
  } catch (const std::exception& e) {
    abort_comm(e.what(), nullptr);
    throw;
  }
}

}  // namespace shardlab
