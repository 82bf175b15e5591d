// Squared L2 norm of a float range, for gradient clipping (CPU reference of
// kernels/cuda/sq_norm.h). Each square and the running sum are in double, as in the engine's
// squared_norm (engine/train/step_math.h): a square of a float is exact in double, so the only
// rounding is the summation's.
#pragma once

#include <cstdint>

namespace shardlab::kernels {

double sq_norm(const float* x, int64_t n);

}  // namespace shardlab::kernels
