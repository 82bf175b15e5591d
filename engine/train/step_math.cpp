#include "engine/train/step_math.h"

#include <algorithm>

#include "engine/core/error.h"

namespace shardlab {

double squared_norm(std::span<const float> values) {
  double sum = 0;
  for (const float v : values) sum += static_cast<double>(v) * static_cast<double>(v);
  return sum;
}

double clip_coefficient(double total_norm, double max_norm) {
  if (!(max_norm > 0)) return 1.0;
  return std::min(max_norm / (total_norm + 1e-6), 1.0);
}

std::vector<int64_t> micro_batch(const std::vector<int64_t>& indices, int64_t count, int64_t m) {
  const auto n = static_cast<int64_t>(indices.size());
  SL_ENFORCE(count >= 1, "micro_batch: count must be >= 1, got {}", count);
  SL_ENFORCE(m >= 0 && m < count, "micro_batch: index {} outside [0, {})", m, count);
  SL_ENFORCE(n % count == 0, "micro_batch: {} indices do not split into {} equal micro-batches", n,
             count);
  return {indices.begin() + m * n / count, indices.begin() + (m + 1) * n / count};
}

}  // namespace shardlab
