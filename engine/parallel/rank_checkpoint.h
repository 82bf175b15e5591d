// Sharded checkpoints of a running job, collectively: every rank writes its serialized training
// state as one shard of a step directory (engine/checkpoint/checkpoint_store.h) and rank 0 commits
// the manifest; a resumed run checks the manifest against its own layout and every rank reads back
// its own shard. A problem on any rank becomes the same error on every rank (so no rank is left
// waiting in a collective and nothing is half loaded).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/checkpoint/manifest.h"
#include "engine/comm/communicator.h"

namespace shardlab {

// What a checkpoint must match to be resumed: the manifest's strategy, world and topology, and a
// description of the model's flat layout (see checkpoint_layout in rank_runner.cpp).
struct CheckpointLayout {
  std::string strategy;
  int world_size = 1;
  int pp = 1, tp = 1, dp = 1;
  nlohmann::json layout;
};

// Runs `fn` on every rank, then agrees: when it threw on any rank, every rank throws the first
// failing rank's error, with the same type (InvalidArgument, FormatError, IoError, TimeoutError,
// InternalError, or Error for anything else) and message. Collective.
void agree_or_throw(Communicator& comm, const std::function<void()>& fn);

// Saves this rank's `state` as its shard of step `step` under `dir`: rank 0 prepares the step
// directory, every rank writes its shard, the entries are gathered and rank 0 commits the
// manifest (keeping the newest `keep` checkpoints). Returns only once the checkpoint is complete
// (on every rank); returns its step directory. Collective.
std::string save_rank_checkpoint(Communicator& comm, const std::string& dir, int64_t step,
                                 const CheckpointLayout& layout, std::span<const uint8_t> state,
                                 int keep);

// The differences between the layout a checkpoint was written on and `mine`, as
// "parallel.world_size: checkpoint 4, this job 2; ...", or "" when there are none.
std::string layout_differences(const CheckpointManifest& m, const CheckpointLayout& mine);

// Reads this rank's shard of the checkpoint `step_or_dir` (a checkpoint directory: its latest
// complete step; or one step directory) after checking its manifest against `mine`
// (InvalidArgument "<step dir>: cannot resume this job from it: <differences>; resharding is not
// supported yet"); shard problems as read_shard() reports them. `manifest` (optional) receives
// the manifest. Collective.
std::vector<uint8_t> load_rank_checkpoint(Communicator& comm, const std::string& step_or_dir,
                                          const CheckpointLayout& mine,
                                          CheckpointManifest* manifest = nullptr);

}  // namespace shardlab
