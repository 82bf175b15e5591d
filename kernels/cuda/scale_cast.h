// Scale a device buffer and cast it between float and bf16: the math of kernels/cpu/scale_cast.h
// (an fp32 multiply, then round to nearest even), enqueued on a stream. Pointers are device
// pointers; a bf16 is carried as uint16_t. Never synchronises; throws std::runtime_error naming
// the kernel when the launch fails.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace shardlab::kernels {

// out[i] = bf16(scale * in[i]); in and out must not overlap.
void scale_cast_to_bf16_cuda(const float* in, uint16_t* out, int64_t n, float scale,
                             cudaStream_t stream);

// out[i] = scale * float(in[i]); in and out must not overlap.
void scale_cast_from_bf16_cuda(const uint16_t* in, float* out, int64_t n, float scale,
                               cudaStream_t stream);

}  // namespace shardlab::kernels
