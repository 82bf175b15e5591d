#include "engine/bench/triad.h"

#include <algorithm>
#include <vector>

#include "engine/bench/harness.h"
#include "engine/core/error.h"

namespace shardlab {

namespace {

// Out of line so the timed loop stays one call per repetition that the compiler cannot merge
// across repetitions or drop (its stores are read back below).
[[gnu::noinline]] void triad(float* __restrict a, const float* __restrict b,
                             const float* __restrict c, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

}  // namespace

TriadResult measure_triad(int64_t n, int reps) {
  SL_ENFORCE(n >= 1, "bench.triad: n must be >= 1, got {}", n);
  SL_ENFORCE(reps >= 1, "bench.triad: reps must be >= 1, got {}", reps);
  const auto size = static_cast<size_t>(n);
  std::vector<float> a(size, 0.0f), b(size, 1.0f), c(size, 2.0f);
  const float s = 3.0f;
  // One warm-up pass: page faults and caches out of the timing.
  const double best =
      bench::best(bench::time_each(1, reps, [&] { triad(a.data(), b.data(), c.data(), s, n); }));
  SL_ENFORCE_T(InternalError, a[0] == 7.0f && a[size - 1] == 7.0f,
               "bench.triad: wrong result {} (expected 7)", a[0]);

  TriadResult res;
  res.n = n;
  res.reps = reps;
  res.best_seconds = best;
  res.gb_per_s = 3.0 * sizeof(float) * static_cast<double>(n) / best / 1e9;
  return res;
}

}  // namespace shardlab
