#include "kernels/cpu/sq_norm.h"

namespace shardlab::kernels {

double sq_norm(const float* x, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return sum;
}

}  // namespace shardlab::kernels
