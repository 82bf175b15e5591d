// Making groups of the threads backend: one communicator per rank, ranks as threads of this
// process. This is also the test harness of ShardLab: run_threads() runs a function on every rank
// and turns the first failure into an exception on the calling thread.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "engine/comm/communicator.h"

namespace shardlab {

// Runs fn(comm) on n ranks (group "world"), one thread each; returns when all have finished and
// rethrows the first failure. When a rank throws, its group (and every group split from it) is
// aborted: peers blocked in, or later entering, an operation get CommError naming the failed rank
// and its message, so nobody hangs.
void run_threads(int n, const CommOptions& options, const std::function<void(Communicator&)>& fn);

// Lower level: a world of n communicators (ThreadsCommunicator, rank i at index i) for callers
// that drive their own threads, one thread per communicator.
//
// Flight recorder: unless options.flight_capacity is 0, each rank gets a FlightRecorder of its own
// (rank r's: comm.options().flight_recorder, with rank() == r); a recorder passed in
// options.flight_recorder is accepted only for a world of one rank (InvalidArgument otherwise).
// Both functions behave the same here.
std::vector<std::unique_ptr<Communicator>> make_thread_world(int n, const CommOptions& options);

}  // namespace shardlab
