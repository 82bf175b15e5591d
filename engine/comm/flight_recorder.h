// FlightRecorder: a rank's ring of its last operations (collectives and send/recv, on every group
// the rank belongs to), kept so that when a wait times out or fails the user can see which rank
// is missing from which collective: compare the ranks' rings, and the one that never issued (or
// never completed) sequence number s of group g is the culprit.
//
// One recorder per rank: the world makers (threads/world.h, mpi/world.h) create it from
// CommOptions::flight_capacity, and split() hands the parent's to its sub-groups, so one rank has
// one ring. Communicators record into it at issue (Communicator::*_async) and when the operation
// completes or fails on this rank; when options().flight_dir is set, a TimeoutError or CommError
// makes the rank write its ring to DIR/flight-rank<world rank>.{txt,json} and say so in the
// exception's message.
//
// Thread-safe; the ring is allocated once, so recording costs two short critical sections and no
// allocation per operation (group names longer than the small-string buffer allocate only until
// every slot has held one).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/comm/comm_record.h"

namespace shardlab {

struct FlightRecorderOptions {
  size_t capacity = 256;  // entries kept; the oldest are overwritten (>= 1)
  int rank = -1;          // world rank, for the dump's file name and header; -1: not known yet
};

class FlightRecorder {
 public:
  enum class State : uint8_t { Issued, Completed, Failed, TimedOut };

  struct Entry {
    uint64_t id = 0;  // 1, 2, 3, ... in issue order over all of this rank's groups
    CommOp op = CommOp::Barrier;
    std::string group;  // "world", "dp[1]", ...
    int group_rank = 0;
    int group_size = 1;
    uint64_t seq = 0;   // as CommRecord::seq: collectives share it across the group's ranks
    int64_t bytes = 0;  // as CommRecord::bytes
    int peer = -1;      // send/recv: the other rank; broadcast: the root; else -1
    int tag = 0;        // send/recv
    State state = State::Issued;
    Clock::time_point issued;
    Clock::time_point completed;  // when it completed or failed; unset while Issued
    std::string error;            // Failed, TimedOut: the error's message
  };

  explicit FlightRecorder(FlightRecorderOptions options = {});
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  size_t capacity() const { return capacity_; }
  int rank() const { return rank_.load(std::memory_order_relaxed); }
  // For a recorder made before the rank was known (make_mpi_world sets it when it is -1).
  void set_rank(int rank) { rank_.store(rank, std::memory_order_relaxed); }

  // An operation was issued (record: op, group, rank, group_size, seq, bytes, peer, tag, start).
  // Returns its id, never 0.
  uint64_t issued(const CommRecord& record);
  // It completed on this rank. Ignored for an id no longer in the ring or no longer Issued.
  void completed(uint64_t id, Clock::time_point when = Clock::now());
  // It failed (state Failed or TimedOut) with message `what`. Applies to an Issued entry, and to a
  // failed one that has no message yet (a later, more precise report of the same failure).
  void failed(uint64_t id, State state, const std::string& what,
              Clock::time_point when = Clock::now());

  // The entries still in the ring, oldest first (newest last).
  std::vector<Entry> snapshot() const;
  // How many operations were issued in all (snapshot() holds the last min(total, capacity)).
  uint64_t total() const;

  // One line per entry, newest last, after a header line; times are seconds since the recorder
  // was made:
  //   #4 all_reduce world rank 0/4 400 B issued 0.012 s completed 0.013 s
  //   #5 all_reduce world rank 0/4 400 B issued 0.013 s -- TIMED OUT at 0.314 s: all_reduce on
  //      group world (seq 5) timed out after 0.3 s on rank 0: rank 3 had not arrived
  // (the second is one line). '#' is the sequence number within the group.
  std::string to_text() const;
  // {"format":"shardlab-flight-record","version":1,"rank":..,"capacity":..,"total":..,
  //  "origin_unix_s":..,"entries":[{..}, ..]}, newest last; the schema (every field, its type and
  //  meaning) is resources/schemas/flight-record.schema.json. An entry: id, op (to_string(CommOp)),
  //  group, group_rank, group_size, seq, bytes, peer, tag, state (to_string(State)), issued_s;
  //  completed_s once it completed or failed; error when it failed with a message. Times are
  //  seconds since origin_unix_s (the recorder's start, Unix seconds). `version` goes up when a
  //  field changes meaning or goes away; fields may be added without it, so readers ignore the
  //  ones they do not know.
  std::string to_json() const;
  // Writes to_json() (a path ending in ".json") or to_text() (any other) to `path`, atomically: a
  // temporary file in the same folder, then rename. Throws IoError.
  void write(const std::string& path) const;
  // Writes DIR/flight-rank<rank>.txt and .json (creating DIR); returns the .txt path. IoError.
  std::string dump(const std::string& dir) const;

 private:
  Entry* find(uint64_t id);  // mu_ held; null when overwritten

  const size_t capacity_;
  std::atomic<int> rank_;
  const Clock::time_point origin_;
  const double origin_unix_s_;

  mutable std::mutex mu_;
  std::vector<Entry> ring_;  // entry with id i lives at (i - 1) % capacity_
  uint64_t next_id_ = 1;
};

const char* to_string(FlightRecorder::State state);  // "issued", "completed", "failed", "timed_out"

}  // namespace shardlab
