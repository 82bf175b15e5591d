// Test-only slowdowns: make chosen ranks slower for real, so that the monitor's diagnosis
// (net/time_accounting.h) can be tested against a known straggler. Never set in a real run.
//
// The environment variable SHARDLAB_TEST_SLOW_RANKS lists ranks and the time, in microseconds,
// added to every micro-batch's forward on them (inside the forward phase, so it counts as
// compute, as on a slower device). The rank sleeps rather than spins: a test machine often has
// fewer cores than ranks, and a spinning rank would slow its peers too: "2:20000" slows world rank
// 2 by 20 ms per micro-batch; "1:5000,3:5000" two ranks. An entry may add "@STEP": the rank is
// slowed from that step on (steps count from 1, as the STEP events do), a rank that BECOMES slow:
// "1:3000@60" slows world rank 1 by 3 ms per micro-batch from step 60 on ("@1", or no "@", from
// the first step). Read by every rank of a job, in-process threads and mpirun/srun workers alike
// (mpirun passes its environment to the processes it starts on this machine).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace shardlab {

inline constexpr const char* kSlowRanksEnv = "SHARDLAB_TEST_SLOW_RANKS";

// One rank's slowdown: `per_micro_batch` added to each micro-batch's forward of steps `from_step`
// and later (steps count from 1).
struct TestSlowdown {
  std::chrono::microseconds per_micro_batch{0};
  int64_t from_step = 1;

  // The time to add to each forward of step `step` (counted from 1).
  std::chrono::microseconds at_step(int64_t step) const {
    return step >= from_step ? per_micro_batch : std::chrono::microseconds(0);
  }
};

// The slowdown of world rank `rank` described by `spec` (the format above; "" is none). Throws
// InvalidArgument naming the variable and the bad entry.
TestSlowdown slowdown_for_rank(const std::string& spec, int rank);
// The same, read from SHARDLAB_TEST_SLOW_RANKS (unset: none).
TestSlowdown test_slowdown(int rank);
// Makes this rank take `d` longer (nothing for zero).
void slow_down(std::chrono::microseconds d);

}  // namespace shardlab
