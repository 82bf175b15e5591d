#include "engine/core/shape.h"

#include "engine/core/error.h"

namespace shardlab {

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    SL_ENFORCE(d >= 0, "negative dimension in shape {}", to_string(shape));
    n *= d;
  }
  return n;
}

std::string to_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace shardlab
