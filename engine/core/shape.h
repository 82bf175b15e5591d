// Shape: the dimensions of a row-major tensor, and the two helpers every module uses with it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardlab {

using Shape = std::vector<int64_t>;

// The element count; InvalidArgument for a negative dimension.
int64_t numel_of(const Shape& shape);
// "[2, 3]".
std::string to_string(const Shape& shape);

}  // namespace shardlab
