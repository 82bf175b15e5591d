// Backend conformance checks: every operation of the Communicator interface against exact
// expected values, written once and run by each backend's suite (threads: ranks as threads;
// mpi: each process under mpirun). Values are small integers in float, so sums are exact and a
// check compares with ==.
//
// Each check is called by every rank of `comm` and throws ConformanceFailure (naming the rank,
// index, expected and actual value) on the first mismatch. Checks never use QVERIFY, because they
// run on rank threads.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"

namespace shardlab::conformance {

struct ConformanceFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The value conventions, for suites that need their own wrappers (e.g. device buffers):
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

void check_all_reduce(Communicator& comm, int64_t count, ReduceOp op);
void check_reduce_scatter(Communicator& comm, int64_t count, ReduceOp op);
void check_all_gather(Communicator& comm, int64_t count);
void check_broadcast(Communicator& comm, int64_t count, int root);
// A ring: every rank sends to rank+1 and receives from rank-1 (non-blocking, so no deadlock).
void check_send_recv_ring(Communicator& comm, int64_t count);
// Several all-reduces in flight at once, waited for in reverse order.
void check_async_overlap(Communicator& comm, int64_t count);
void check_barrier(Communicator& comm);
// Point to point is not ordered with collectives: rank 0 sends to rank 1 while its all-reduce is
// pending, and rank 1 receives before it joins that all-reduce. A backend that queued the send
// behind the collective would deadlock (until the timeout).
void check_p2p_not_ordered_with_collectives(Communicator& comm);
// Splits `comm` three ways (even/odd ranks reversed by key; a group that leaves rank 0 out; one
// group per rank) and runs all-reduce, all-gather and broadcast inside each sub-group.
void check_split(Communicator& comm);
// Runs all of the above over sweep_counts() (and every root for small counts).
void check_everything(Communicator& comm);

}  // namespace shardlab::conformance
