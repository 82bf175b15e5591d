// The embedding lookup of a table cut by rows on the GPU: the math of
// kernels/cpu/range_embedding.h on device pointers, enqueued on a stream.
//
// The scatter-add uses no atomics: the caller builds the index of the rows in range on the host
// (range_embedding_grad_index, kernels/cpu/range_embedding.h) from the host copy of the ids,
// copies its three arrays to the device, and each (segment, column) thread adds its rows in
// increasing order onto the local table row, as the CPU does; the position gradient is one thread
// per (position, column) adding every batch row at that position in order. Same bits as the CPU.
// Never synchronises; throws std::runtime_error naming the kernel when a launch fails or a size
// is negative.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/embedding.h"

namespace shardlab::kernels {

// y[i, :] = table[ids[i] - begin, :] for ids in [begin, end), else zeros.
void range_embedding_forward_cuda(const int32_t* ids, const float* table, int64_t begin,
                                  int64_t end, float* y, int64_t n, int64_t dim,
                                  cudaStream_t stream);

// index: device copies of range_embedding_grad_index(ids, n, begin, end)'s arrays (seg_id holds
// local rows). dtable [end - begin, dim] += the dy rows of each segment; dpos (may be null)
// [steps, dim] += dy[i, :] for every row i at that position, in range or not.
void range_embedding_backward_cuda(const EmbeddingGradIndexCuda& index, const float* dy,
                                   float* dtable, float* dpos, int64_t n, int64_t steps,
                                   int64_t dim, cudaStream_t stream);

}  // namespace shardlab::kernels
