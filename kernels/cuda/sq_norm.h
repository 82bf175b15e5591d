// Squared L2 norm of a device float range, for gradient clipping: the math of
// kernels/cpu/sq_norm.h (squares and sums in double), enqueued on a stream.
//
// Two passes, no atomics: each block sums its grid-stride share in double and reduces it in a
// fixed tree to one partial; a second one-block launch reduces the partials in a fixed order. The
// result for a given n is therefore the same on every run (deterministic), and differs from the
// CPU's sequential sum only by summation order (relative ~1e-15). The partials live in a
// stream-ordered allocation (cudaMallocAsync/cudaFreeAsync), so nothing synchronises.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace shardlab::kernels {

// *out = sum of x[i]^2 over [0, n), written on the device when the stream reaches it; x and out
// are device pointers. Throws std::runtime_error naming the kernel when a launch or the
// workspace allocation fails.
void sq_norm_cuda(const float* x, int64_t n, double* out, cudaStream_t stream);

}  // namespace shardlab::kernels
