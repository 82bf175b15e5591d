// Scale a buffer and cast it between float and bf16 (CPU reference of kernels/cuda/scale_cast.h):
// the product is an fp32 multiply, the cast rounds to nearest even (kernels/cpu/bf16.h).
#pragma once

#include <cstdint>

namespace shardlab::kernels {

// out[i] = bf16(scale * in[i]); in and out must not overlap.
void scale_cast_to_bf16(const float* in, uint16_t* out, int64_t n, float scale);

// out[i] = scale * float(in[i]); in and out must not overlap.
void scale_cast_from_bf16(const uint16_t* in, float* out, int64_t n, float scale);

}  // namespace shardlab::kernels
