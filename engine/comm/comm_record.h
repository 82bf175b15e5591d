// What the communication layer records about every operation, and where records go.
//
// Bandwidths follow nccl-tests (doc/PERFORMANCE.md): algbw = S / t, with S the size of the whole
// array (for reduce-scatter and all-gather: per-rank count x element size x n); busbw = algbw x
// factor, the factor being 2(n-1)/n for all-reduce, (n-1)/n for reduce-scatter and all-gather,
// and 1 for broadcast, send and recv.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/core/timer.h"

namespace shardlab {

enum class CommOp { AllReduce, ReduceScatter, AllGather, Broadcast, Barrier, Send, Recv };
const char* to_string(CommOp op);

enum class ReduceOp { Sum, Avg, Max, Min };
const char* to_string(ReduceOp op);

// nccl-tests' bus-bandwidth factor for `op` over a group of n ranks.
double bus_factor(CommOp op, int n);

// What a collective moved, as its caller says: a gradient bucket or a parameter block of a
// sharding strategy (`unit` indexes the strategy's ShardLayout units, IShardedOptimizer::
// comm_units()). For telemetry only: the teaching view lights up the ranges a collective moved.
// Unknown (the default) for everything else: activations, losses, norms, benchmarks.
enum class CommArray : uint8_t { unknown = 0, params = 1, grads = 2 };
const char* to_string(CommArray array);
struct CommSubject {
  CommArray array = CommArray::unknown;
  int32_t unit = -1;  // -1: not a unit
};

struct CommRecord {
  CommOp op = CommOp::Barrier;
  std::string group;  // the communicator's name: "world", "dp[3]", ...
  int rank = 0;       // rank within the group
  int group_size = 1;
  uint64_t seq = 0;         // collectives: the same on every rank of the group; p2p: per-rank order
  int64_t bytes = 0;        // S as defined above
  int peer = -1;            // send/recv: the other rank; broadcast: the root
  int tag = 0;              // send/recv
  Clock::time_point start;  // when the call was made
  // When completion was observed on this rank: for the threads backend and mpi collectives the
  // moment the operation finished; for mpi send/recv and nccl the moment wait(), done() or a
  // later call noticed it, so an overlapped operation's time includes the overlap.
  Clock::time_point end;
  bool ok = true;          // false when it failed or timed out
  uint64_t flight_id = 0;  // its entry in options().flight_recorder; 0 when not recorded
  // Waiting for peers ("Waits" in communicator.h). `wait`: seconds this rank was blocked before
  // the last rank of the group arrived (collectives) or before the peer's message came (recv);
  // the rest of seconds() is the transfer. `last`: the group rank that arrived last (collectives;
  // the peer for a recv that waited); -1 when nobody waited for anyone (a group of one) or the
  // backend cannot know. wait is -1 where the backend cannot know (nccl; send).
  double wait = -1;
  int last = -1;
  CommSubject subject;  // what the caller said it moves
  double seconds() const;
  double algbw_gbs() const;  // GB/s (1e9 bytes)
  double busbw_gbs() const;
};

// Receives a record for every completed (or failed) operation. Called from the thread that
// completed the operation; a sink shared by several ranks must be thread-safe.
class CommSink {
 public:
  virtual ~CommSink() = default;
  virtual void on_record(const CommRecord& record) = 0;
};

// Keeps every record in memory (thread-safe). For tests, benchmarks and the teaching demo.
class MemorySink : public CommSink {
 public:
  void on_record(const CommRecord& record) override;
  std::vector<CommRecord> records() const;
  void clear();

 private:
  mutable std::mutex mu_;
  std::vector<CommRecord> records_;
};

}  // namespace shardlab
