#include "engine/tensor_parallel/tp_slicing.h"

#include <algorithm>
#include <string_view>

#include "engine/core/error.h"
#include "engine/tensor_parallel/tp_gpt.h"

namespace shardlab {
namespace {

// True when `name` is `suffix` or ends with "." + suffix.
bool named(std::string_view name, std::string_view suffix) {
  if (!name.ends_with(suffix)) return false;
  return name.size() == suffix.size() || name[name.size() - suffix.size() - 1] == '.';
}

// Columns of the global parameter viewed as [shape[0], numel / shape[0]].
int64_t matrix_cols(const ParamInfo& p) {
  return p.shape.empty() || p.shape[0] == 0 ? 1 : p.numel / p.shape[0];
}

std::vector<SliceRect> rects_for(const ParamInfo& g, const GptConfig& config, TpGroup tp,
                                 bool& replicated) {
  const int64_t rows = g.shape.empty() ? 1 : g.shape[0], cols = matrix_cols(g);
  const std::string_view name = g.name;
  replicated = false;
  if (named(name, "tok.weight") || named(name, "head.weight")) {
    const IndexRange v = tp.part(config.vocab_size);
    return {{v.begin, v.size(), 0, cols}};
  }
  const IndexRange heads = tp.part(config.heads);
  const int64_t d = config.width / config.heads, C = config.width;
  if (named(name, "attn.qkv.weight") || named(name, "attn.qkv.bias")) {
    std::vector<SliceRect> r;
    for (int64_t part = 0; part < 3; ++part)
      r.push_back({part * C + heads.begin * d, heads.size() * d, 0, cols});
    return r;
  }
  const IndexRange hidden = tp.part(config.mlp_ratio * C);
  if (named(name, "mlp.fc.weight") || named(name, "mlp.fc.bias"))
    return {{hidden.begin, hidden.size(), 0, cols}};
  if (named(name, "attn.proj.weight")) return {{0, rows, heads.begin * d, heads.size() * d}};
  if (named(name, "mlp.proj.weight")) return {{0, rows, hidden.begin, hidden.size()}};
  replicated = true;
  return {{0, rows, 0, cols}};
}

void check_span(size_t size, int64_t base, const ParamInfo& p, const char* what) {
  SL_ENFORCE(p.offset >= base && p.offset + p.numel - base <= static_cast<int64_t>(size),
             "tp slicing: {} elements [{}, {}) of {} are not inside the {} span [{}, {})", what,
             p.offset, p.offset + p.numel, p.name, what, base, base + static_cast<int64_t>(size));
}

// Checks both spans, then calls fn(index in the global span, index in the local span, count) for
// each rectangle row, in local order.
template <typename Fn>
void for_each_run(const ParamSlice& slice, const ParamLayout& local, const ParamLayout& global,
                  size_t global_size, int64_t global_base, size_t local_size, int64_t local_base,
                  Fn&& fn) {
  const ParamInfo& g = global[slice.global];
  const ParamInfo& l = local[slice.local];
  check_span(global_size, global_base, g, "global");
  check_span(local_size, local_base, l, "local");
  const int64_t cols = matrix_cols(g);
  int64_t at = l.offset - local_base;
  for (const SliceRect& r : slice.rects)
    for (int64_t row = 0; row < r.rows; ++row, at += r.cols)
      fn(g.offset - global_base + (r.row_begin + row) * cols + r.col_begin, at, r.cols);
}

}  // namespace

std::vector<ParamSlice> tp_param_slices(const ParamLayout& local, const ParamLayout& global,
                                        const GptConfig& config, TpGroup tp) {
  validate_tp_gpt(config, tp.size);
  std::vector<ParamSlice> slices;
  const auto& params = local.params();
  slices.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    ParamSlice s;
    s.local = static_cast<int>(i);
    s.global = global.index_of(params[i].name);
    const ParamInfo& g = global[s.global];
    s.rects = rects_for(g, config, tp, s.replicated);
    const int64_t cols = matrix_cols(g), rows = g.shape.empty() ? 1 : g.shape[0];
    int64_t n = 0;
    for (const SliceRect& r : s.rects) {
      SL_ENFORCE_T(InternalError,
                   r.row_begin >= 0 && r.row_begin + r.rows <= rows && r.col_begin >= 0 &&
                       r.col_begin + r.cols <= cols,
                   "tp slicing: a rectangle of {} is outside its [{}, {}] matrix", g.name, rows,
                   cols);
      n += r.rows * r.cols;
    }
    SL_ENFORCE_T(InternalError, n == params[i].numel,
                 "tp slicing: {} holds {} elements on tp rank {} of {} but its slice has {}",
                 params[i].name, params[i].numel, tp.rank, tp.size, n);
    slices.push_back(std::move(s));
  }
  return slices;
}

void copy_global_to_local(const ParamSlice& slice, const ParamLayout& local,
                          const ParamLayout& global, std::span<const float> global_src,
                          int64_t global_base, std::span<float> local_dst, int64_t local_base) {
  for_each_run(slice, local, global, global_src.size(), global_base, local_dst.size(), local_base,
               [&](int64_t g, int64_t l, int64_t n) {
                 std::copy_n(global_src.data() + g, n, local_dst.data() + l);
               });
}

void copy_local_to_global(const ParamSlice& slice, const ParamLayout& local,
                          const ParamLayout& global, std::span<const float> local_src,
                          int64_t local_base, std::span<float> global_dst, int64_t global_base) {
  for_each_run(slice, local, global, global_dst.size(), global_base, local_src.size(), local_base,
               [&](int64_t g, int64_t l, int64_t n) {
                 std::copy_n(local_src.data() + l, n, global_dst.data() + g);
               });
}

}  // namespace shardlab
