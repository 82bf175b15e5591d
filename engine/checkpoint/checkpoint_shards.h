// The shard files of one checkpoint step, in the model's global indices (shard_file.h): what a
// rank writes from its CheckpointView, and ShardSet, which finds any global element in whichever
// shard holds it. rank_checkpoint.h adds the collective protocol on top.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/checkpoint/manifest.h"
#include "engine/checkpoint/shard_file.h"
#include "engine/sharding/checkpoint_view.h"

namespace shardlab {

// Rank `rank`'s shard file for `step`: the elements of view.write_map with their parameters
// ("param", read from view.held through view.held_map) and every optimizer state array.
// InternalError when the view is inconsistent (an owned element it does not hold).
std::vector<uint8_t> encode_rank_shard(int rank, int64_t step, const CheckpointView& view,
                                       const TrainingProgress& progress);

// Every shard of one checkpoint step, indexed by global element. The constructor checks each
// shard listed in the manifest (present, its size, its header, its rank and step, elements within
// the model's `total`, the same training position in every shard); read() then loads only the
// tensors of the shards that hold the elements asked for, each checked against its CRC-32.
// Replicas that wrote the same elements count once.
class ShardSet {
 public:
  ShardSet(std::string step_dir, const CheckpointManifest& m, int64_t total);

  const TrainingProgress& progress() const { return progress_; }

  // dst[run.local + i] = tensor `name`'s global element run.global + i, for every run of `map`;
  // FormatError naming the step directory and the range when no shard holds some element.
  void read(const std::string& name, const IndexMap& map, std::span<float> dst);

 private:
  struct Piece {
    int64_t global = 0, count = 0;
    int shard = 0;
    int64_t offset = 0;  // element offset in the shard's tensors
  };
  const std::vector<float>& tensor(int shard, const std::string& name);

  std::string dir_;
  std::vector<std::string> paths_;
  std::vector<ShardHeader> headers_;
  std::vector<Piece> pieces_;  // sorted by global, disjoint
  TrainingProgress progress_;
  std::string cached_name_;  // the tensors of one name at a time
  std::map<int, std::vector<float>> cache_;
};

}  // namespace shardlab
