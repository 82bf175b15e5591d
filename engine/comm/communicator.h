// Communicator: a group of ranks and the collectives they run together. One interface, three
// backends with the same file names: threads/ (ranks as threads of one process), mpi/ (OpenMPI,
// processes under mpirun or srun) and nccl/ (GPUs; buffers are device pointers).
//
// Data is float32. Every rank of a group must issue the same collectives in the same order.
//
// Uneven counts. reduce_scatter and all_gather cut an array of `total` elements into size()
// contiguous chunks with chunk_range(): the first total % size() chunks hold one element more
// than the rest (10 over 4 ranks: 3, 3, 2, 2). Any total works, zero included; ranks whose chunk
// is empty pass empty spans.
//
// Non-blocking. Each *_async call returns a WorkHandle at once; the buffers must stay alive and
// untouched until wait() returns, or until the handle is destroyed (destroying a pending handle
// fails the operation or waits, bounded, until it no longer touches the buffers). The blocking
// forms are async + wait.
//
// Timeouts and failures. Every wait is bounded by options().timeout. On timeout wait() throws
// TimeoutError naming the operation, the group, the sequence number and, where the backend can
// know, the ranks that had not arrived. A collective that cannot complete because a peer failed
// throws CommError. Bad arguments (a buffer of the wrong size, a root or peer out of range) throw
// InvalidArgument before anything is sent; calls that disagree across ranks (different counts,
// ops or roots) throw CommError on the threads and mpi backends (both compare every collective's
// signature as part of their arrival step); NCCL cannot see them.
//
// Buffers. reduce_scatter's and all_gather's input and output must not overlap (InvalidArgument):
// MPI forbids aliased buffers, and in-place layouts differ between libraries.
//
// Order. Collectives on one communicator complete in issue order. Send and recv are not ordered
// with collectives (a send may complete while an earlier all_reduce_async is still pending, as in
// MPI); among themselves they match in issue order per (peer, tag).
//
// Records. Every operation, completed or failed, produces a CommRecord (op, group, bytes, start,
// end, algbw, busbw) that goes to options().sink.
//
// Waits. A collective cannot complete before the last rank of its group arrives; the time a rank
// spends blocked before that is its wait, the rest of the operation is transfer. Records carry
// both (CommRecord::wait, ::last) where the backend can know them: threads stamps each rank's
// arrival at the rendezvous (exact, one clock); mpi takes both from the arrival times its arrival
// gate exchanges (10 us resolution; on several machines as right as their clocks agree; the wait is
// capped by the time the rank really spent in the gate); a recv's wait is its whole time blocked (a
// receiver cannot tell waiting for the sender from the transfer), its last the peer. NCCL
// enqueues on a stream and cannot see arrival: its records say -1 (unknown).
//
// Flight recorder (flight_recorder.h). When options().flight_recorder is set, every operation is
// also entered in that ring when issued and marked when it completes or fails on this rank; with
// options().flight_dir set, a TimeoutError or CommError that a wait() will throw first makes the
// rank write its ring to DIR/flight-rank<world rank>.txt (and .json), and the message ends with
// "; flight record (last N operations of rank R) written to DIR/flight-rank<R>.txt".
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <span>
#include <string>

#include "engine/comm/comm_record.h"
#include "engine/core/error.h"
#include "engine/core/param_layout.h"

namespace shardlab {

// A collective that cannot complete: a peer failed, the group was torn down, or the ranks' calls
// disagree. (Timeouts throw TimeoutError.)
class CommError : public Error {
  using Error::Error;
};

class FlightRecorder;  // flight_recorder.h

struct CommOptions {
  std::chrono::milliseconds timeout{60000};  // bound on every wait
  std::shared_ptr<CommSink> sink;            // receives a record per operation; may be null

  // The ring this rank records its operations in (see above); split() passes it on, so a rank's
  // groups share one. May be null (nothing recorded). The world makers (make_thread_world,
  // run_threads, make_mpi_world) create one per rank of flight_capacity entries when it is null
  // and flight_capacity > 0; a recorder given to make_thread_world can only serve a world of one.
  std::shared_ptr<FlightRecorder> flight_recorder;
  size_t flight_capacity = 256;  // for the world makers; 0: no recorder
  // Where a rank writes its flight record when a wait fails (created if missing); empty: never
  // written. The job layer picks it (e.g. the run's or the checkpoint's folder).
  std::string flight_dir;
};

// What the world makers of every backend give rank `rank`: `options`, whose flight recorder is
// told its rank when it has none yet, or, when there is no recorder and flight_capacity > 0, a
// new one of that capacity for `rank`.
CommOptions world_rank_options(const CommOptions& options, int rank);

class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the operation completes, at most the communicator's timeout; throws
  // TimeoutError or CommError on failure. Later calls return at once or rethrow the same error.
  virtual void wait() = 0;
  // True once the operation has completed or failed; never blocks.
  virtual bool done() = 0;
};
using WorkHandle = std::shared_ptr<Work>;

// The chunk of an array of `total` elements that part `index` of `parts` owns (see above).
IndexRange chunk_range(int64_t total, int parts, int index);

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }
  const CommOptions& options() const { return options_; }
  virtual const char* backend() const = 0;  // "threads", "mpi", "nccl"
  // For a backend that moves device memory itself (nccl): its operations wait, on the device, for
  // the work already queued on `stream` (the native stream of the device whose memory they move,
  // Device::native_stream()) before they read it. Nothing for host backends.
  virtual void order_after_stream(void* stream) { (void)stream; }

  // In place over `data` (the same count on every rank). Avg divides the sum by size().
  // `subject`: what the caller moves (comm_record.h), carried to the operation's record.
  WorkHandle all_reduce_async(std::span<float> data, ReduceOp op, CommSubject subject = {});
  // input: the whole array (the same count on every rank); output: this rank's chunk of the
  // reduced array, chunk_range(input.size(), size(), rank()).size() elements.
  WorkHandle reduce_scatter_async(std::span<const float> input, std::span<float> output,
                                  ReduceOp op, CommSubject subject = {});
  // input: this rank's chunk of an array of output.size() elements; output: the whole array.
  WorkHandle all_gather_async(std::span<const float> input, std::span<float> output,
                              CommSubject subject = {});
  // Root's data is copied to every rank's `data` (the same count on every rank).
  WorkHandle broadcast_async(std::span<float> data, int root);
  WorkHandle barrier_async();
  // Point to point, matched by (peer, tag) in issue order; counts must agree.
  WorkHandle send_async(std::span<const float> data, int peer, int tag);
  WorkHandle recv_async(std::span<float> data, int peer, int tag);

  void all_reduce(std::span<float> data, ReduceOp op) { all_reduce_async(data, op)->wait(); }
  void reduce_scatter(std::span<const float> input, std::span<float> output, ReduceOp op) {
    reduce_scatter_async(input, output, op)->wait();
  }
  void all_gather(std::span<const float> input, std::span<float> output, CommSubject subject = {}) {
    all_gather_async(input, output, subject)->wait();
  }
  void broadcast(std::span<float> data, int root) { broadcast_async(data, root)->wait(); }
  void barrier() { barrier_async()->wait(); }
  void send(std::span<const float> data, int peer, int tag) { send_async(data, peer, tag)->wait(); }
  void recv(std::span<float> data, int peer, int tag) { recv_async(data, peer, tag)->wait(); }

  // Collective over this group. Ranks passing the same color form a new group, ranked by (key,
  // old rank), named `name` (e.g. "dp[3]"); a negative color joins no group and returns null.
  std::unique_ptr<Communicator> split(int color, int key, const std::string& name);

 protected:
  Communicator(int rank, int size, std::string name, CommOptions options);

  // A validated call: record has op, group, rank, group_size, seq, bytes, peer, tag and start.
  struct Call {
    CommRecord record;
    ReduceOp reduce = ReduceOp::Sum;
    int root = 0;
    // "all_reduce on group dp[3] (seq 12)", for messages.
    std::string describe() const;
  };

  virtual WorkHandle do_all_reduce(std::span<float> data, const Call& call) = 0;
  virtual WorkHandle do_reduce_scatter(std::span<const float> input, std::span<float> output,
                                       const Call& call) = 0;
  virtual WorkHandle do_all_gather(std::span<const float> input, std::span<float> output,
                                   const Call& call) = 0;
  virtual WorkHandle do_broadcast(std::span<float> data, const Call& call) = 0;
  virtual WorkHandle do_barrier(const Call& call) = 0;
  virtual WorkHandle do_send(std::span<const float> data, const Call& call) = 0;
  virtual WorkHandle do_recv(std::span<float> data, const Call& call) = 0;
  virtual std::unique_ptr<Communicator> do_split(int color, int key, const std::string& name) = 0;

  // Backends call this once per operation when it completes (ok) or fails on this rank: stamps
  // the end time, marks the flight recorder's entry and hands the record to the sink.
  void report(CommRecord record, bool ok) const;
  // report(record, false) for a failure whose error is known: the flight recorder's entry gets
  // the error's message (TimedOut for a TimeoutError), the ring is written out when flight_dir is
  // set and `error` is a TimeoutError or CommError, and the error to throw is returned: the same
  // one, or one of the same type whose message says where the ring went. Never throws (a sink
  // that throws is ignored: the operation has failed already).
  std::exception_ptr report_failure(CommRecord record, std::exception_ptr error) const noexcept;

 private:
  Call make_call(CommOp op, int64_t bytes, int peer, int tag, CommSubject subject = {});
  // Runs a backend's do_*: an exception thrown before it returns a handle fails the entry.
  template <typename F>
  WorkHandle issue(const Call& call, F&& f);

  int rank_;
  int size_;
  std::string name_;
  CommOptions options_;
  uint64_t collective_seq_ = 0;
  uint64_t p2p_seq_ = 0;
};

}  // namespace shardlab
