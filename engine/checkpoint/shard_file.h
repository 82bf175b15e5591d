// The contents of one rank's shard file, in the model's global coordinates, so that a checkpoint
// written by one strategy and layout can be read by any other (resharding): a shard says which
// elements of the full model's flat parameters it holds (runs of global indices) and holds, for
// each tensor ("param" and the base optimizer's state arrays such as "exp_avg"), the values of
// exactly those elements, run after run. Nothing here knows about strategies.
//
// On disk (shard format 2, little-endian):
//   magic "SLSHRD2\0" | u32 header length H | H bytes of header JSON | u32 CRC-32 of the header
//   | tensor data: each tensor's float32 values at data offset `offset` (bytes from the end of the
//     header CRC), `count` values, with its own CRC-32 in the header
// Header JSON:
//   {"rank": 3, "step": 100, "progress": {...},        (opaque here: the training position)
//    "runs": [[global_begin, count], ...],              (sorted, disjoint, non-empty)
//    "tensors": [{"name": "param", "offset": 0, "count": N, "crc32": "1a2b3c4d"}, ...]}
// Every tensor holds sum(count of runs) values. A reader can take the header alone and then one
// tensor at a time, each checked against its own CRC.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace shardlab {

// Elements [begin, begin + count) of the model's global flat parameters.
struct GlobalRun {
  int64_t begin = 0;
  int64_t count = 0;
  bool operator==(const GlobalRun&) const = default;
};

struct ShardTensor {
  std::string name;
  uint64_t offset = 0;  // bytes from the start of the data section
  int64_t count = 0;    // float values
  uint32_t crc32 = 0;
};

struct ShardHeader {
  int rank = 0;
  int64_t step = 0;
  nlohmann::json progress;  // the caller's training position (steps, data, early stopping...)
  std::vector<GlobalRun> runs;
  std::vector<ShardTensor> tensors;
  uint64_t data_start = 0;  // file offset of the data section (set by the readers)

  int64_t elements() const;                                // sum of the runs' counts
  const ShardTensor* find(const std::string& name) const;  // null when absent
};

// The file's bytes: `header`'s rank, step, progress and runs, and the tensors (name, values in
// run order; each exactly header.elements() long — InvalidArgument otherwise, as for unsorted or
// overlapping runs). header.tensors is ignored (computed here).
std::vector<uint8_t> encode_shard(
    const ShardHeader& header,
    const std::vector<std::pair<std::string, std::span<const float>>>& tensors);

// Reads and checks the header of the shard file `path` (FormatError naming the file for a bad
// magic, an unsupported format, a header CRC mismatch, malformed JSON or runs, JSON nested deeper
// than kMaxJsonDepth or holding a number beyond double's range (engine/core/json_limits.h),
// tensors that do not fit in `file_bytes`; IoError when it cannot be read).
ShardHeader read_shard_header(const std::string& path, uint64_t file_bytes);

// Reads tensor `name` of the shard at `path` (FormatError naming the file and the tensor when it
// is absent or its CRC does not match: "<path>: checksum mismatch in tensor exp_avg ...").
std::vector<float> read_shard_tensor(const std::string& path, const ShardHeader& header,
                                     const std::string& name);

}  // namespace shardlab
