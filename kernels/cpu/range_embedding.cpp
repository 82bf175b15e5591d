#include "kernels/cpu/range_embedding.h"

#include <algorithm>

namespace shardlab::kernels {

namespace {
bool in_range(int64_t id, int64_t begin, int64_t end) {
  return id >= begin && id < end;
}
}  // namespace

void range_embedding_forward(const int32_t* ids, const float* table, int64_t begin, int64_t end,
                             float* y, int64_t n, int64_t dim) {
  for (int64_t i = 0; i < n; ++i) {
    float* yi = y + i * dim;
    const int64_t id = ids[i];
    if (!in_range(id, begin, end)) {
      std::fill(yi, yi + dim, 0.0f);
      continue;
    }
    const float* row = table + (id - begin) * dim;
    std::copy(row, row + dim, yi);
  }
}

void range_embedding_backward(const int32_t* ids, const float* dy, int64_t begin, int64_t end,
                              float* dtable, float* dpos, int64_t n, int64_t steps, int64_t dim) {
  for (int64_t i = 0; i < n; ++i) {
    const float* g = dy + i * dim;
    const int64_t id = ids[i];
    if (in_range(id, begin, end)) {
      float* dst = dtable + (id - begin) * dim;
      for (int64_t j = 0; j < dim; ++j) dst[j] += g[j];
    }
    if (dpos) {
      float* dp = dpos + (i % steps) * dim;
      for (int64_t j = 0; j < dim; ++j) dp[j] += g[j];
    }
  }
}

EmbeddingGradIndex range_embedding_grad_index(const int32_t* ids, int64_t n, int64_t begin,
                                              int64_t end) {
  // Counting sort by local row, stable: rows of one id keep their increasing order.
  const int64_t num = std::max<int64_t>(end - begin, 0);
  std::vector<int32_t> count(static_cast<size_t>(num) + 1, 0);
  for (int64_t i = 0; i < n; ++i)
    if (in_range(ids[i], begin, end)) ++count[static_cast<size_t>(ids[i] - begin) + 1];
  EmbeddingGradIndex index;
  for (int64_t row = 0; row < num; ++row) {
    const auto k = static_cast<size_t>(row);
    if (count[k + 1] > 0) {
      index.seg_id.push_back(static_cast<int32_t>(row));
      index.seg_start.push_back(count[k]);
    }
    count[k + 1] += count[k];  // count[k] becomes the first slot of local row k
  }
  const int32_t in = count[static_cast<size_t>(num)];
  index.seg_start.push_back(in);
  index.order.resize(static_cast<size_t>(in));
  for (int64_t i = 0; i < n; ++i)
    if (in_range(ids[i], begin, end))
      index.order[static_cast<size_t>(count[static_cast<size_t>(ids[i] - begin)]++)] =
          static_cast<int32_t>(i);
  return index;
}

}  // namespace shardlab::kernels
