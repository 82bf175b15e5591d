// Test-only slowdowns: make chosen ranks slower for real, so that the monitor's diagnosis
// (net/time_accounting.h) can be tested against a known straggler. Never set in a real run.
//
// The environment variable SHARDLAB_TEST_SLOW_RANKS lists ranks and the time, in microseconds,
// added to every micro-batch's forward on them (inside the forward phase, so it counts as
// compute, as on a slower device). The rank sleeps rather than spins: a test machine often has
// fewer cores than ranks, and a spinning rank would slow its peers too: "2:20000" slows world rank
// 2 by 20 ms per micro-batch; "1:5000,3:5000" two ranks. Read by every rank of a job, in-process
// threads and mpirun/srun workers alike (mpirun passes its environment to the processes it starts
// on this machine).
#pragma once

#include <chrono>
#include <string>

namespace shardlab {

inline constexpr const char* kSlowRanksEnv = "SHARDLAB_TEST_SLOW_RANKS";

// The busy work for world rank `rank` described by `spec` (the format above; "" is none). Throws
// InvalidArgument naming the variable and the bad entry.
std::chrono::microseconds slowdown_for_rank(const std::string& spec, int rank);
// The same, read from SHARDLAB_TEST_SLOW_RANKS (unset: none).
std::chrono::microseconds test_slowdown(int rank);
// Makes this rank take `d` longer (nothing for zero).
void slow_down(std::chrono::microseconds d);

}  // namespace shardlab
