// A rank slowed on purpose: chosen ranks made slower for real, to see what a straggler looks like
// in the app, the monitor and the page, and to check that the monitor's diagnosis
// (net/time_accounting.h) names it. Off unless asked for.
//
// SHARDLAB_SLOW_RANKS (an environment variable, so that it reaches every rank: threads of the
// app or of `shardlab run`, and mpirun/srun workers) lists ranks and the time, in microseconds,
// added to every micro-batch's forward on them (inside the forward phase, so it counts as
// compute, as on a slower device). The rank sleeps rather than spins: a test machine often has
// fewer cores than ranks, and a spinning rank would slow its peers too: "2:20000" slows world rank
// 2 by 20 ms per micro-batch; "1:5000,3:5000" two ranks. An entry may add "@STEP": the rank is
// slowed from that step on (steps count from 1, as the STEP events do), a rank that BECOMES slow:
// "1:3000@60" slows world rank 1 by 3 ms per micro-batch from step 60 on ("@1", or no "@", from
// the first step). The launch layer reads it (engine/launch/slow_ranks.h) into
// RankRunOptions::slow_ranks; mpirun passes its environment to the processes it starts.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace shardlab {

inline constexpr const char* kSlowRanksEnv = "SHARDLAB_SLOW_RANKS";

// One rank's slowdown: `per_micro_batch` added to each micro-batch's forward of steps `from_step`
// and later (steps count from 1).
struct Slowdown {
  std::chrono::microseconds per_micro_batch{0};
  int64_t from_step = 1;

  // The time to add to each forward of step `step` (counted from 1).
  std::chrono::microseconds at_step(int64_t step) const {
    return step >= from_step ? per_micro_batch : std::chrono::microseconds(0);
  }
};

// The slowdown of world rank `rank` described by `spec` (the format above; "" is none). Throws
// InvalidArgument naming the variable and the bad entry.
Slowdown slowdown_for_rank(const std::string& spec, int rank);
// Makes this rank take `d` longer (nothing for zero).
void slow_down(std::chrono::microseconds d);

}  // namespace shardlab
