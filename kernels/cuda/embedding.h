// Embedding gather and scatter-add on the GPU: the math of kernels/cpu/embedding.h on device
// pointers, enqueued on a stream.
//
// The scatter-add uses no atomics: the caller builds an EmbeddingGradIndex on the host from the
// host copy of the ids (kernels/cpu/embedding.h), copies its three arrays to the device, and each
// (segment, column) thread adds its rows in increasing order, as the CPU does; the position
// gradient is one thread per (position, column) adding the batch rows in order. Deterministic.
// Never synchronises; throws std::runtime_error naming the kernel when a launch fails.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace shardlab::kernels {

void embedding_forward_cuda(const int32_t* ids, const float* table, const float* pos, float* y,
                            int64_t n, int64_t steps, int64_t dim, cudaStream_t stream);

// Device copies of an EmbeddingGradIndex's arrays (order: n, seg_start: segments + 1,
// seg_id: segments).
struct EmbeddingGradIndexCuda {
  const int32_t* order = nullptr;
  const int32_t* seg_start = nullptr;
  const int32_t* seg_id = nullptr;
  int64_t segments = 0;
};

// dtable[seg_id[s], :] += dy rows of segment s; dpos (may be null) [steps, dim] += dy[i, :] for
// every row i at that position.
void embedding_backward_cuda(const EmbeddingGradIndexCuda& index, const float* dy, float* dtable,
                             float* dpos, int64_t n, int64_t steps, int64_t dim,
                             cudaStream_t stream);

}  // namespace shardlab::kernels
