// The embedding lookup of a table cut by rows (engine/tensor_parallel/tp_embedding.h): this rank
// holds the global rows [begin, end) as a local table [end - begin, dim]; ids outside the range
// read as zero rows (another rank supplies them) and contribute no table gradient. CPU reference
// of kernels/cuda/range_embedding.h. Row i of the n = batch * steps rows is position i % steps.
#pragma once

#include <cstdint>

#include "kernels/cpu/embedding.h"

namespace shardlab::kernels {

// y[i, :] = table[ids[i] - begin, :] when begin <= ids[i] < end, else zeros; y [n, dim].
void range_embedding_forward(const int32_t* ids, const float* table, int64_t begin, int64_t end,
                             float* y, int64_t n, int64_t dim);

// ADDS, for i in increasing order: dtable[ids[i] - begin, :] += dy[i, :] when the id is in
// [begin, end), then dpos[i % steps, :] += dy[i, :] for every row (dpos may be null). Every
// output element sums its contributions in row order, so any implementation keeping that order
// gives the same bits.
void range_embedding_backward(const int32_t* ids, const float* dy, int64_t begin, int64_t end,
                              float* dtable, float* dpos, int64_t n, int64_t steps, int64_t dim);

// The rows whose ids lie in [begin, end), grouped by id for the CUDA scatter-add
// (kernels/cuda/range_embedding.h): segment s holds the LOCAL row seg_id[s] (id - begin) and the
// rows order[seg_start[s] .. seg_start[s + 1]) in increasing order; order holds only the rows in
// range. Built on the host from the host copy of the ids (counting sort, stable).
EmbeddingGradIndex range_embedding_grad_index(const int32_t* ids, int64_t n, int64_t begin,
                                              int64_t end);

}  // namespace shardlab::kernels
