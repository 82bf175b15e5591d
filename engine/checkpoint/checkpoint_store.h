// Sharded checkpoints on disk, one directory per saved step:
//
//   DIR/step-00000100/shard-00000.bin ... shard-<rank>.bin   one per rank, written atomically
//   DIR/step-00000100/manifest.json                          written LAST: its presence is what
//                                                            makes the checkpoint complete
//   DIR/latest                                               "step-00000100\n", written after it
//
// A crash at any point leaves the previous complete checkpoint loadable. These are per-process
// file operations; the collective order is the caller's job: rank 0 calls prepare_step(), every
// rank write_shard(), rank 0 gathers the entries and calls commit() after a barrier.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/checkpoint/manifest.h"

namespace shardlab {

struct CheckpointWriteOptions {
  // Tests only: called before each stage of commit(): "write-manifest", "write-latest",
  // "prune". Throwing from it simulates a crash at that point.
  std::function<void(const char* stage)> before_stage;
};

// "DIR/step-00000100".
std::string step_dir(const std::string& dir, int64_t step);

// Rank 0, before any shard of `step` is written: creates the step directory and removes a
// manifest.json left there by an earlier run, so a crash while re-writing the step cannot leave
// an old manifest over new shards.
void prepare_step(const std::string& dir, int64_t step);

// Writes `rank`'s shard of `step` atomically (creating the step directory if needed) and returns
// its manifest entry (file name, size, CRC-32).
ShardEntry write_shard(const std::string& dir, int64_t step, int rank,
                       std::span<const uint8_t> bytes);

// Rank 0, after every shard is written: checks that each listed shard file exists with the listed
// size (IoError / FormatError otherwise), writes manifest.json atomically, then DIR/latest, then
// removes the oldest complete checkpoints beyond `keep_last` (<= 0: keep all) and incomplete step
// directories older than m.step. The checkpoint just committed is always kept, even when newer
// step directories exist (a run resumed from an earlier step); those count as older for pruning.
// InvalidArgument when `m` is inconsistent (manifest_problem).
void commit(const std::string& dir, const CheckpointManifest& m, int keep_last,
            const CheckpointWriteOptions& options = {});

// The step directory that `step_or_dir` names: itself when it is a step directory (its name is
// step-<digits> or it holds a manifest.json), otherwise the complete checkpoint that
// `step_or_dir`/latest names, falling back to the newest step-* directory with a manifest.
// IoError "DIR: no complete checkpoint (no manifest.json in any step-* directory)" when none.
std::string find_checkpoint(const std::string& step_or_dir);

// Reads the manifest of find_checkpoint(step_or_dir) (IoError when it is missing, FormatError
// naming the file and the field when it is malformed or its step differs from its directory's).
// The shards are in step_dir(parent, m.step).
CheckpointManifest read_manifest(const std::string& step_or_dir);

// Reads `rank`'s shard and checks it against the manifest. IoError "<file>: missing shard for
// rank 2"; FormatError "<file>: truncated (4096 of 8192 bytes)", "<file>: checksum mismatch
// (manifest crc32 1a2b3c4d, file 9f8e7d6c): the shard is corrupt".
std::vector<uint8_t> read_shard(const std::string& step_dir, const CheckpointManifest& m, int rank);

// Reads the manifest of `step_or_dir` (as read_manifest) and checks every shard's size and
// checksum, throwing the first problem as read_shard does.
void verify(const std::string& step_or_dir);

// A human-readable multi-line summary for `shardlab checkpoint inspect`: format, step, strategy,
// topology, world, and every shard's file, size and checksum.
std::string describe(const CheckpointManifest& m);

}  // namespace shardlab
