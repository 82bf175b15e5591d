// Embedding lookup (gather) and its gradient (scatter-add), with an optional learned position
// table added, as the GPT model's first block uses them. CPU reference of
// kernels/cuda/embedding.h. Row i of the n = batch * steps rows is position i % steps.
#pragma once

#include <cstdint>
#include <vector>

namespace shardlab::kernels {

// y[i, :] = table[ids[i], :] (+ pos[i % steps, :] when pos is not null), y [n, dim].
// ids must lie in [0, rows of table): callers check them.
void embedding_forward(const int32_t* ids, const float* table, const float* pos, float* y,
                       int64_t n, int64_t steps, int64_t dim);

// ADDS dtable[ids[i], :] += dy[i, :] and (when dpos is not null) dpos[i % steps, :] += dy[i, :],
// for i in increasing order: every output element sums its contributions in the same order, so
// any implementation keeping that order gives the same bits.
void embedding_backward(const int32_t* ids, const float* dy, float* dtable, float* dpos, int64_t n,
                        int64_t steps, int64_t dim);

// The rows of a batch grouped by id, for a scatter-add without atomics (kernels/cuda): segment s
// holds id seg_id[s] and the rows order[seg_start[s] .. seg_start[s + 1]), in increasing order.
// Built on the host from the host copy of the ids (counting sort, stable).
struct EmbeddingGradIndex {
  std::vector<int32_t> order;      // n row numbers, grouped by id
  std::vector<int32_t> seg_start;  // segments + 1 offsets into order
  std::vector<int32_t> seg_id;     // segments ids, increasing
  int64_t segments() const { return static_cast<int64_t>(seg_id.size()); }
};
// num: rows of the table (ids in [0, num)).
EmbeddingGradIndex embedding_grad_index(const int32_t* ids, int64_t n, int64_t num);

}  // namespace shardlab::kernels
