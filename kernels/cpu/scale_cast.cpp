#include "kernels/cpu/scale_cast.h"

#include "kernels/cpu/bf16.h"

namespace shardlab::kernels {

void scale_cast_to_bf16(const float* in, uint16_t* out, int64_t n, float scale) {
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(scale * in[i]);
}

void scale_cast_from_bf16(const uint16_t* in, float* out, int64_t n, float scale) {
  for (int64_t i = 0; i < n; ++i) out[i] = scale * bf16_to_float(in[i]);
}

}  // namespace shardlab::kernels
