// Backend conformance checks: every operation of the Communicator interface against exact
// expected values, written once and run by each backend's suite (threads: ranks as threads;
// mpi: each process under mpirun; nccl: one rank per GPU). Values are small integers in float, so
// sums are exact and a check compares with ==.
//
// A check makes its buffers through a BufferFactory: host memory by default; the nccl suite plugs
// in device memory (values are made on the host, uploaded, run through the operation and read
// back). The host suites therefore run the very code path the nccl suite runs on GPUs.
//
// Each check is called by every rank of `comm` and throws ConformanceFailure (naming the rank,
// index, expected and actual value) on the first mismatch. Checks never use QVERIFY, because they
// run on rank threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"

namespace shardlab::conformance {

struct ConformanceFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One buffer a check hands to the communicator.
class Buffer {
 public:
  virtual ~Buffer() = default;
  // What the communicator is given (host or device memory).
  virtual std::span<float> span() = 0;
  // The contents, copied to the host for comparison.
  virtual std::vector<float> read() const = 0;
};

// Makes a check's buffers, each starting with the given values.
class BufferFactory {
 public:
  virtual ~BufferFactory() = default;
  virtual std::unique_ptr<Buffer> make(const std::vector<float>& values) const = 0;
};

// Plain host vectors: the threads and mpi backends.
const BufferFactory& host_buffers();

// Where the checks keep their buffers and what the backend promises beyond the common interface.
// The defaults are the host backends' (threads, mpi).
struct Backend {
  const BufferFactory* buffers = &host_buffers();
  // Point to point matches messages by tag, so a ring may receive in the opposite order to the
  // sends. false (NCCL): a pair's messages match in issue order, and a send holds the stream until
  // its receive is posted, so rank 0 receives first and the others send first.
  bool p2p_matches_tags = true;
  // Point to point may overtake a pending collective (check_p2p_not_ordered_with_collectives).
  // false (NCCL): both are queued on one stream, in order.
  bool p2p_overtakes_collectives = true;
};

// The value conventions, for suites that check by hand:
// rank r contributes (r + 1) * pattern(i) at index i, pattern(i) = (i % 7) - 3 in [-3, 3];
// reduced() is the exact result of reducing those over n ranks (Avg within 1e-6 relative).
float contribution(int rank, int64_t i);
float reduced(ReduceOp op, int n, int64_t i);
// Throws ConformanceFailure naming `what`, the count, group, rank and first differing element.
// Equal means == (or within 1e-6 relative, for Avg's division).
void expect_equal(const Communicator& comm, const std::string& what, int64_t count,
                  std::span<const float> got, std::span<const float> want);

// Element counts every suite sweeps: empty, one, primes, powers of two and their neighbours, and
// counts that do not divide by any group size 2..8.
const std::vector<int64_t>& sweep_counts();

void check_all_reduce(Communicator& comm, int64_t count, ReduceOp op, const Backend& backend = {});
void check_reduce_scatter(Communicator& comm, int64_t count, ReduceOp op,
                          const Backend& backend = {});
void check_all_gather(Communicator& comm, int64_t count, const Backend& backend = {});
void check_broadcast(Communicator& comm, int64_t count, int root, const Backend& backend = {});
// A ring: every rank sends two messages (tags 1 and 2) to rank+1 and receives two from rank-1
// (non-blocking, so no deadlock); in the order Backend::p2p_matches_tags allows.
void check_send_recv_ring(Communicator& comm, int64_t count, const Backend& backend = {});
// Several all-reduces in flight at once, waited for in reverse order.
void check_async_overlap(Communicator& comm, int64_t count, const Backend& backend = {});
void check_barrier(Communicator& comm);
// Point to point is not ordered with collectives: rank 0 sends to rank 1 while its all-reduce is
// pending, and rank 1 receives before it joins that all-reduce. A backend that queued the send
// behind the collective would deadlock (until the timeout).
void check_p2p_not_ordered_with_collectives(Communicator& comm);
// Splits `comm` three ways (even/odd ranks reversed by key; a group that leaves rank 0 out; one
// group per rank) and runs all-reduce, all-gather and broadcast inside each sub-group.
void check_split(Communicator& comm, const Backend& backend = {});
// Runs all of the above over sweep_counts() (and every root for small counts); the point to point
// ordering check only where Backend::p2p_overtakes_collectives.
void check_everything(Communicator& comm, const Backend& backend = {});

}  // namespace shardlab::conformance
