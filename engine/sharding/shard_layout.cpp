#include "engine/sharding/shard_layout.h"

#include <algorithm>

#include "engine/core/error.h"

namespace shardlab {

namespace {
int64_t round_up(int64_t n, int64_t m) {
  return (n + m - 1) / m * m;
}
}  // namespace

ShardLayout ShardLayout::buckets(int64_t total, int world, int64_t bucket_elements) {
  SL_ENFORCE(world >= 1, "ShardLayout: world size must be >= 1, got {}", world);
  SL_ENFORCE(total >= 0, "ShardLayout: negative element count {}", total);
  SL_ENFORCE(bucket_elements >= 1, "ShardLayout: bucket size must be >= 1 element, got {}",
             bucket_elements);
  ShardLayout s;
  s.world_ = world;
  s.total_ = total;
  s.padded_total_ = round_up(total, world);
  const int64_t bucket = round_up(bucket_elements, world);
  for (int64_t begin = 0; begin < s.padded_total_; begin += bucket) {
    ShardUnit u;
    u.begin = begin;
    u.padded_begin = begin;
    u.padded = std::min(bucket, s.padded_total_ - begin);
    u.size = std::max<int64_t>(0, std::min(u.padded, total - begin));
    u.shard_offset = begin / world;
    u.chunk = u.padded / world;
    s.units_.push_back(u);
  }
  return s;
}

ShardLayout ShardLayout::blocks(const ParamLayout& layout, int world) {
  SL_ENFORCE(world >= 1, "ShardLayout: world size must be >= 1, got {}", world);
  ShardLayout s;
  s.world_ = world;
  s.total_ = layout.size();
  s.block_units_.assign(static_cast<size_t>(layout.num_blocks()), -1);
  for (int b = 0; b < layout.num_blocks(); ++b) {
    const IndexRange r = layout.block_range(b);
    if (r.size() == 0) continue;
    ShardUnit u;
    u.begin = r.begin;
    u.size = r.size();
    u.padded = round_up(r.size(), world);
    u.padded_begin = s.padded_total_;
    u.shard_offset = s.padded_total_ / world;
    u.block = b;
    u.chunk = u.padded / world;
    s.block_units_[static_cast<size_t>(b)] = static_cast<int>(s.units_.size());
    s.units_.push_back(u);
    s.padded_total_ += u.padded;
  }
  return s;
}

IndexRange ShardLayout::chunk(int unit, int rank) const {
  SL_ENFORCE(unit >= 0 && unit < static_cast<int>(units_.size()), "ShardLayout: unit {} of {}",
             unit, units_.size());
  SL_ENFORCE(rank >= 0 && rank < world_, "ShardLayout: rank {} of {}", rank, world_);
  const int64_t c = units_[static_cast<size_t>(unit)].chunk;
  return {rank * c, (rank + 1) * c};
}

int ShardLayout::unit_of_block(int block) const {
  if (block < 0 || block >= static_cast<int>(block_units_.size())) return -1;
  return block_units_[static_cast<size_t>(block)];
}

}  // namespace shardlab
