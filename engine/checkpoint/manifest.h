// The manifest of a sharded checkpoint (manifest.json in a step directory): what was saved, by
// which strategy on which topology, and one entry per rank's shard file with its size and CRC-32.
//
// On disk (format 2; shards in shard_file.h format 2):
//   {"format_version": 2, "step": 100, "strategy": "zero2", "world_size": 4,
//    "pp": 1, "tp": 1, "dp": 4, "layout": {...}, "checksum": "crc32",
//    "shards": [{"rank": 0, "file": "shard-00000.bin", "bytes": 8192, "crc32": "cbf43926"}, ...]}
// Unknown keys are ignored; every known key is required and type-checked.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardlab {

// One rank's shard file inside the step directory.
struct ShardEntry {
  int rank = 0;
  std::string file;  // a plain file name relative to the step directory, e.g. "shard-00003.bin"
  uint64_t bytes = 0;
  uint32_t crc32 = 0;  // zlib's CRC-32 of the whole file
};

struct CheckpointManifest {
  static constexpr int kFormatVersion = 2;

  int format_version = kFormatVersion;
  int64_t step = 0;
  std::string strategy;
  int world_size = 1;
  int pp = 1, tp = 1, dp = 1;
  nlohmann::json layout;  // opaque: the flat layout description the caller provides
  std::vector<ShardEntry> shards;
};

// "shard-00003.bin": the file name of `rank`'s shard.
std::string shard_file_name(int rank);

// The first semantic problem of `m` as "field: problem", or "" when there is none: step >= 0,
// world_size >= 1 and == pp*tp*dp, shard ranks unique and in [0, world_size), shard files plain
// names. (A manifest may list fewer shards than ranks, e.g. when replicas share one.)
std::string manifest_problem(const CheckpointManifest& m);

nlohmann::json to_json(const CheckpointManifest& m);

// Reads a manifest; `source` (its path) starts every FormatError: a missing key, a wrong type, an
// unsupported format_version, an invalid value, e.g.
// "ckpt/step-00000100/manifest.json: format_version 7 is not supported (this build reads 1)".
CheckpointManifest manifest_from_json(const nlohmann::json& j, const std::string& source);

// Parses manifest text (FormatError naming `source` when it is not JSON, nests deeper than
// kMaxJsonDepth or holds a number beyond double's range: "SOURCE: nested deeper than 64 levels"),
// then manifest_from_json.
CheckpointManifest parse_manifest(std::string_view text, const std::string& source);

}  // namespace shardlab
