#include "engine/sharding/element_map.h"

#include <algorithm>

#include "engine/core/error.h"

namespace shardlab {

namespace {

// Appends r, merging it into the last run when it continues it on both sides.
void append(IndexMap& m, IndexRun r) {
  if (r.count <= 0) return;
  if (!m.empty()) {
    IndexRun& last = m.back();
    if (last.local + last.count == r.local && last.global + last.count == r.global) {
      last.count += r.count;
      return;
    }
  }
  m.push_back(r);
}

int64_t matrix_cols(const ParamInfo& p) {
  return p.shape.empty() || p.shape[0] == 0 ? 1 : p.numel / p.shape[0];
}

}  // namespace

IndexMap identity_map(int64_t n) {
  IndexMap m;
  append(m, {0, 0, n});
  return m;
}

IndexMap shard_map(const ShardLayout& layout, int rank) {
  SL_ENFORCE(rank >= 0 && rank < layout.world(), "shard_map: rank {} outside a world of {}", rank,
             layout.world());
  IndexMap m;
  for (size_t u = 0; u < layout.units().size(); ++u) {
    const ShardUnit& unit = layout.units()[u];
    const IndexRange c = layout.chunk(static_cast<int>(u), rank);
    const int64_t real = std::clamp<int64_t>(unit.size - c.begin, 0, c.size());
    append(m, {unit.shard_offset, unit.begin + c.begin, real});
  }
  return m;
}

IndexMap tp_map(const std::vector<ParamSlice>& slices, const ParamLayout& local,
                const ParamLayout& global, bool skip_replicated) {
  IndexMap m;
  for (const ParamSlice& s : slices) {
    if (skip_replicated && s.replicated) continue;
    const ParamInfo& g = global[s.global];
    const ParamInfo& l = local[s.local];
    const int64_t cols = matrix_cols(g);
    int64_t at = l.offset;
    for (const SliceRect& r : s.rects)
      for (int64_t row = 0; row < r.rows; ++row, at += r.cols)
        append(m, {at, g.offset + (r.row_begin + row) * cols + r.col_begin, r.cols});
  }
  return m;
}

int64_t first_overlap(const IndexMap& by_global, int64_t global) {
  // The first run that ends after `global`.
  const auto it =
      std::upper_bound(by_global.begin(), by_global.end(), global,
                       [](int64_t g, const IndexRun& r) { return g < r.global + r.count; });
  return it - by_global.begin();
}

IndexMap compose(const IndexMap& a, const IndexMap& b) {
  // b by its local side, as a lookup from y.
  IndexMap b_by_y;
  b_by_y.reserve(b.size());
  for (const IndexRun& r : b) b_by_y.push_back({r.global, r.local, r.count});  // swapped
  b_by_y = sorted_by_global(std::move(b_by_y));
  IndexMap out;
  for (const IndexRun& r : a)
    for_each_overlap(b_by_y, r.global, r.count, [&](int64_t z, int64_t y, int64_t n) {
      append(out, {r.local + (y - r.global), z, n});
    });
  return out;
}

IndexMap sorted_by_global(IndexMap m) {
  std::sort(m.begin(), m.end(),
            [](const IndexRun& x, const IndexRun& y) { return x.global < y.global; });
  IndexMap out;
  out.reserve(m.size());
  for (const IndexRun& r : m) append(out, r);
  return out;
}

int64_t mapped_elements(const IndexMap& m) {
  int64_t n = 0;
  for (const IndexRun& r : m) n += r.count;
  return n;
}

}  // namespace shardlab
