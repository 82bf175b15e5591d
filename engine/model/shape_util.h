// Small shape checks shared by the layers (internal to engine/model): every layer validates what
// it is given so a wrong wiring fails with a message naming the layer, not with a corrupt buffer.
#pragma once

#include <cstdint>
#include <string_view>

#include "engine/core/error.h"
#include "engine/device/tensor.h"

namespace shardlab::detail {

// Rows of `x` (all leading dimensions) when its last dimension must be `last`.
inline int64_t rows_with_last(const Tensor& x, int64_t last, std::string_view who) {
  SL_ENFORCE(x.rank() >= 1 && x.dim(-1) == last, "{}: expected last dimension {}, got shape {}",
             who, last, to_string(x.shape()));
  return x.numel() / last;
}

// `shape` with its last dimension replaced.
inline Shape with_last(Shape shape, int64_t last) {
  shape.back() = last;
  return shape;
}

// A gradient must match the last forward output element for element. The leading dimensions may
// be regrouped (the model hands back [B*T, V] for a [B, T, V] output). Before any forward the
// expected size is 0, so a backward without a forward fails here too.
inline void check_grad(const Tensor& dy, int64_t numel, int64_t last, std::string_view who) {
  SL_ENFORCE(dy.numel() == numel && dy.rank() >= 1 && dy.dim(-1) == last,
             "{}: gradient of shape {} does not match the last output ({} elements, last dim {})",
             who, to_string(dy.shape()), numel, last);
}

}  // namespace shardlab::detail
