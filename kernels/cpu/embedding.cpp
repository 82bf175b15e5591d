#include "kernels/cpu/embedding.h"

#include <algorithm>

namespace shardlab::kernels {

void embedding_forward(const int32_t* ids, const float* table, const float* pos, float* y,
                       int64_t n, int64_t steps, int64_t dim) {
  for (int64_t i = 0; i < n; ++i) {
    const float* row = table + static_cast<int64_t>(ids[i]) * dim;
    float* yi = y + i * dim;
    if (!pos) {
      std::copy(row, row + dim, yi);
      continue;
    }
    const float* p = pos + (i % steps) * dim;
    for (int64_t j = 0; j < dim; ++j) yi[j] = row[j] + p[j];
  }
}

void embedding_backward(const int32_t* ids, const float* dy, float* dtable, float* dpos, int64_t n,
                        int64_t steps, int64_t dim) {
  for (int64_t i = 0; i < n; ++i) {
    const float* g = dy + i * dim;
    float* dst = dtable + static_cast<int64_t>(ids[i]) * dim;
    for (int64_t j = 0; j < dim; ++j) dst[j] += g[j];
    if (dpos) {
      float* dp = dpos + (i % steps) * dim;
      for (int64_t j = 0; j < dim; ++j) dp[j] += g[j];
    }
  }
}

EmbeddingGradIndex embedding_grad_index(const int32_t* ids, int64_t n, int64_t num) {
  // Counting sort by id, stable: rows of one id keep their increasing order.
  std::vector<int32_t> count(static_cast<size_t>(num) + 1, 0);
  for (int64_t i = 0; i < n; ++i) ++count[static_cast<size_t>(ids[i]) + 1];
  EmbeddingGradIndex index;
  for (int64_t id = 0; id < num; ++id) {
    const auto k = static_cast<size_t>(id);
    if (count[k + 1] > 0) {
      index.seg_id.push_back(static_cast<int32_t>(id));
      index.seg_start.push_back(count[k]);
    }
    count[k + 1] += count[k];  // count[k] becomes the first slot of id k
  }
  index.seg_start.push_back(static_cast<int32_t>(n));
  index.order.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    index.order[static_cast<size_t>(count[static_cast<size_t>(ids[i])]++)] =
        static_cast<int32_t>(i);
  return index;
}

}  // namespace shardlab::kernels
