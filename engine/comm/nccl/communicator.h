// NcclCommunicator: the Communicator interface over NCCL, one GPU per rank. Make one with
// make_nccl_world() (world.h); split() makes the others.
//
// Buffers are DEVICE pointers. Every span passed to this backend must cover memory on this
// communicator's GPU (cudaMalloc'd or managed); the host never reads or writes it. Host memory is
// rejected with InvalidArgument before anything is sent.
//
// Streams and ordering. The communicator owns a CUDA stream (non-blocking, so the legacy default
// stream does not serialise with it). Before each operation that stream waits, on the GPU, for the
// work already queued on the compute stream (set_compute_stream(); by default the legacy default
// stream, which itself waits for every blocking stream), so data produced by earlier kernels is
// complete when NCCL reads it. Each operation then enqueues its NCCL call(s) and records a CUDA
// event; Work::wait() polls that event and NCCL's error state until its deadline. Nothing ever
// calls cudaStreamSynchronize, so no wait is unbounded.
//
// Non-blocking NCCL. Communicators are created with ncclConfig_t::blocking = 0, so NCCL never
// blocks inside a call: it returns ncclInProgress and finishes the call (init, split, finalize, or
// the launch of an operation) on a helper thread, and the backend polls ncclCommGetAsyncError until
// it is done, bounded by options().timeout, before touching the communicator again. That costs a
// little per operation (recent NCCL starts a thread per call), and *_async calls can take a while
// the first time two ranks talk, while NCCL connects them. NCCL_COMM_BLOCKING=1 in the environment
// overrides the setting and takes these bounds away.
//
// Uneven counts. NCCL's reduce-scatter and all-gather need the same count on every rank. When
// chunk_range() gives uneven chunks (total % size() != 0), the data is padded through a device
// scratch buffer of ceil(total / size()) * size() elements: chunks are copied into equal slots with
// cudaMemcpyAsync on the communicator's stream, NCCL runs in place on the scratch, and the result
// is copied out. Even totals go straight to NCCL. The scratch grows on demand and is never shrunk;
// outgrown buffers are kept until destruction, since operations still in flight may use them.
//
// Send and recv. NCCL has no tags: messages between two ranks are matched in the order they were
// issued. Tags are checked (>= 0) and recorded but do not select messages, so a pair of ranks must
// post its receives in the order the sends were made (unlike threads and mpi). Each send or recv
// occupies the stream until its peer posts the matching call, so a ring in which every rank sends
// first deadlocks; let one rank receive first (see tests/comm/nccl).
//
// Failures. NCCL cannot see calls that disagree across ranks: they hang (and time out) or compute
// garbage. On a timeout, wait() aborts the NCCL communicator (ncclCommAbort) and throws
// TimeoutError naming the operation, group, sequence number and rank; NCCL cannot tell which ranks
// are missing. After any timeout or CUDA/NCCL failure the communicator is aborted and unusable:
// pending handles fail with CommError and further calls throw CommError. Make a new world.
//
// Threads. A communicator and its handles are used by one thread at a time (the interface's rule);
// that thread may differ from call to call, since every entry point makes the right GPU current
// and restores the caller's. Handles may outlive the communicator: its destructor settles them.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"

namespace shardlab {

class NcclCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm`, a ready NCCL communicator (from ncclCommInitRankConfig or
  // ncclCommSplit, non-blocking) on `device`; aborts it if construction fails. Use
  // make_nccl_world() rather than calling this directly.
  NcclCommunicator(ncclComm_t comm, int device, std::string name, CommOptions options);
  // Waits (at most options().timeout) for queued operations, then finalizes and destroys the NCCL
  // communicator; aborts it instead when that wait or the finalize runs past the timeout.
  ~NcclCommunicator() override;

  const char* backend() const override { return "nccl"; }
  int device() const { return device_; }
  // The stream NCCL runs on, for callers that want to order their own work after it with events.
  cudaStream_t stream() const { return stream_; }
  // Operations wait on the GPU for work queued on `stream` before the call. Default:
  // cudaStreamLegacy.
  void set_compute_stream(cudaStream_t stream) { compute_stream_ = stream; }
  void order_after_stream(void* stream) override {
    set_compute_stream(static_cast<cudaStream_t>(stream));
  }
  // True once a timeout or failure has aborted the NCCL communicator.
  bool aborted() const { return aborted_; }

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
  class Op;  // the Work of one operation (communicator.cpp)

  // Runs `enqueue` (which queues NCCL calls and copies on stream_) between the wait on the compute
  // stream and the completion event, and returns the operation's handle.
  template <class Enqueue>
  WorkHandle launch(const Call& call, Enqueue&& enqueue);
  // Checks the return code of an NCCL call made for `call`, then polls until NCCL has finished
  // accepting it (ncclInProgress), at most until `deadline`.
  void settle(ncclResult_t rc, const char* what, const Call& call, Clock::time_point deadline);
  // Throws InvalidArgument unless `data` (when not empty) is memory on this GPU.
  void check_device_buffer(const void* data, size_t count, const Call& call,
                           const char* which) const;
  // A device buffer of at least `count` floats, ordered on stream_.
  float* scratch(int64_t count);
  // Device-to-device copy on stream_ (nothing for count 0).
  void copy(float* dst, const float* src, int64_t count);
  // Observes operations that completed (front of in_flight_), emitting their records even when
  // their handles were dropped unwaited. Never blocks.
  void reap();
  // Settles `op`, observed complete, and every operation issued before it.
  void complete_through(Op* op);
  // Aborts the NCCL communicator after `reason`, first settling every operation still in flight
  // except `culprit` (which reports its own error). Idempotent.
  void abort_comm(const std::string& reason, const Op* culprit);
  std::string timeout_message(const Call& call, const char* phase) const;

  ncclComm_t comm_ = nullptr;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaStream_t compute_stream_ = cudaStreamLegacy;
  cudaEvent_t inputs_ready_ = nullptr;  // re-recorded on compute_stream_ before each operation
  float* barrier_word_ = nullptr;       // one device float that barriers all-reduce
  float* scratch_ = nullptr;
  int64_t scratch_count_ = 0;
  std::vector<float*> outgrown_;               // older scratch buffers, freed by the destructor
  std::deque<std::shared_ptr<Op>> in_flight_;  // issue order, not yet observed complete
  bool aborted_ = false;
  std::string abort_reason_;
};

}  // namespace shardlab
