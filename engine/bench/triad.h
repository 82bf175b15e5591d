// STREAM-style triad, the memory-bandwidth yardstick the optimizer benchmark is measured against.
#pragma once

#include <cstdint>

namespace shardlab {

struct TriadResult {
  int64_t n = 0;            // elements per array
  int reps = 0;             // timed repetitions
  double best_seconds = 0;  // fastest repetition
  double gb_per_s = 0;      // 3 * 4 * n bytes / best_seconds / 1e9
};

// Times a[i] = b[i] + s * c[i] over three float arrays of n elements (allocated and first
// touched here), `reps` times after one warm-up pass, and reports the best repetition. Bytes
// follow the STREAM convention: 3 arrays x 4 bytes x n, i.e. the write-allocate read of `a` that
// ordinary stores cause is not counted. Throws InvalidArgument for n < 1 or reps < 1.
TriadResult measure_triad(int64_t n, int reps);

}  // namespace shardlab
