// ShardLayout: how a flat parameter buffer is cut into units and each unit into equal per-rank
// chunks.
//
// A unit is the granule of communication: a gradient bucket (DDP, ZeRO-1, ZeRO-2) or a model
// block (FSDP). Each unit of `size` real elements is padded with zeros to `padded`, a multiple of
// the world size, so every rank owns exactly padded / world elements of it: chunk r is
// [r * padded / world, (r + 1) * padded / world) within the unit. A rank's shard is its chunks of
// every unit, back to back, in unit order: shard_size() = sum(padded) / world elements, the same
// on every rank. The base optimizer updates that shard as one contiguous local range.
//
//   buckets(10, 4, 4):  padded total 12, units [0,4) [4,8) [8,10)+2 pad; each rank owns 3
//   blocks(layout, 4):  one unit per model block, each padded on its own (FSDP's flat params)
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/param_layout.h"

namespace shardlab {

struct ShardUnit {
  int64_t begin = 0;         // first flat element of the model layout in this unit
  int64_t size = 0;          // real elements, [begin, begin + size)
  int64_t padded = 0;        // size rounded up to a multiple of the world size
  int64_t padded_begin = 0;  // where the unit starts in the padded flat space
  int64_t shard_offset = 0;  // where this unit's chunk starts in every rank's local shard
  int block = -1;            // the model block (blocks() layouts), else -1
  int64_t chunk = 0;         // padded / world: each rank's share
};

class ShardLayout {
 public:
  // Units of about bucket_elements (rounded up to a multiple of world) over [0, total), cut from
  // the front; the last one is padded so the padded total is total rounded up to a multiple of
  // world. world == 1 gives plain buckets with no padding.
  static ShardLayout buckets(int64_t total, int world, int64_t bucket_elements);
  // One unit per block of `layout` (blocks without parameters are skipped), each padded alone.
  static ShardLayout blocks(const ParamLayout& layout, int world);

  int world() const { return world_; }
  const std::vector<ShardUnit>& units() const { return units_; }
  int64_t total() const { return total_; }                // real elements
  int64_t padded_total() const { return padded_total_; }  // sum of padded
  int64_t shard_size() const { return padded_total_ / world_; }
  // Rank r's chunk of unit u, in unit-local padded coordinates.
  IndexRange chunk(int unit, int rank) const;
  // The unit of block b (blocks() layouts), or -1 when the block has no parameters.
  int unit_of_block(int block) const;

 private:
  int world_ = 1;
  int64_t total_ = 0;
  int64_t padded_total_ = 0;
  std::vector<ShardUnit> units_;
  std::vector<int> block_units_;
};

}  // namespace shardlab
