// Sharded checkpoints of a running job, collectively: every rank writes the parameters and
// base-optimizer state it owns, in the full model's global indices (checkpoint_view.h,
// engine/checkpoint/shard_file.h), as one shard of a step directory
// (engine/checkpoint/checkpoint_store.h), and rank 0 commits the manifest. Loading reads, on
// every rank, the global elements it needs from whichever shards hold them, so a checkpoint
// written by one strategy and layout loads into another (ZeRO-2 on 4 ranks -> FSDP on 2, 2x2x2 ->
// 1x1x1, ...), with the same parameters and optimizer state. A problem on any rank becomes the
// same error on every rank (so no rank is left waiting in a collective and nothing is half
// loaded).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>

#include "engine/checkpoint/manifest.h"
#include "engine/comm/communicator.h"
#include "engine/core/param_layout.h"
#include "engine/sharding/checkpoint_view.h"

namespace shardlab {

// The job a checkpoint was written by: its strategy and topology (which may differ on load:
// resharding) and what must match to load it (`layout`: the model, its parameter count and
// fingerprint, the base optimizer and its state arrays, the global batch size).
struct CheckpointLayout {
  std::string strategy;
  int world_size = 1;
  int pp = 1, tp = 1, dp = 1;
  nlohmann::json layout;
};

// The key of CheckpointLayout::layout that lists every parameter of the full model in layout
// order, [{"name": "fc0.weight", "shape": [256, 784]}, ...]. It only describes (the fingerprint is
// what must match, so layout_differences skips it); checkpoints written before it existed lack it.
inline constexpr const char* kLayoutTensorsKey = "tensors";

// Runs `fn` on every rank, then agrees: when it threw on any rank, every rank throws the first
// failing rank's error, with the same type (InvalidArgument, FormatError, IoError, TimeoutError,
// InternalError, or Error for anything else) and message. Collective.
void agree_or_throw(Communicator& comm, const std::function<void()>& fn);

// Saves this rank's part (`view`, `progress`) as its shard of step `step` under `dir`: rank 0
// prepares the step directory, every rank writes its shard, the entries are gathered and rank 0
// commits the manifest (keeping the newest `keep` checkpoints). Returns, once the checkpoint is
// complete on every rank, its step directory. Collective.
std::string save_rank_checkpoint(Communicator& comm, const std::string& dir, int64_t step,
                                 const CheckpointLayout& layout, const CheckpointView& view,
                                 const TrainingProgress& progress, int keep);

// What keeps a checkpoint from loading into `mine`: "model layout optimizer: checkpoint \"adam\",
// this job \"sgd\"; ...", or "" when it can load (the strategy and topology may differ).
std::string layout_differences(const CheckpointManifest& m, const CheckpointLayout& mine);
// How the checkpoint's layout differs from `mine` in strategy and topology, e.g.
// "zero2 on 4 ranks (1x1x4) -> fsdp on 2 ranks (1x1x2)", or "" when it does not (no resharding).
std::string resharding(const CheckpointManifest& m, const CheckpointLayout& mine);

// Loads the checkpoint `step_or_dir` (a checkpoint directory: its latest complete step; or one
// step directory) into `view` after checking its manifest against `mine` (InvalidArgument
// "<step dir>: cannot resume this job from it: <differences>"): every rank reads the global
// elements of its held parameters and optimizer state from the shards that hold them (each
// checked: missing, truncated, corrupt header or tensor, elements that no shard holds — named by
// file). Nothing in `view` changes unless every rank read everything. Returns the training
// position; `manifest` (optional) receives the manifest. Collective.
TrainingProgress load_rank_checkpoint(Communicator& comm, const std::string& step_or_dir,
                                      const CheckpointLayout& mine, const CheckpointView& view,
                                      CheckpointManifest* manifest = nullptr);

// One tensor ("param", or a base-optimizer state array such as "exp_avg") of the checkpoint
// `step_or_dir` over the whole model (its layout's `params` elements), whatever layout wrote it:
// for `shardlab checkpoint consolidate` and for comparing checkpoints. Every element must be held
// by some shard (FormatError naming the missing range otherwise). `progress` and `manifest`
// (optional) receive the training position and the manifest. Not collective.
std::vector<float> read_checkpoint_tensor(const std::string& step_or_dir, const std::string& name,
                                          CheckpointManifest* manifest = nullptr,
                                          TrainingProgress* progress = nullptr);

// The full model's parameter names and shapes, in layout order, as the manifest `m` of
// `step_dir` lists them (kLayoutTensorsKey); every parameter in block 0. FormatError naming
// step_dir when the list is missing (a checkpoint written before ShardLab recorded it), malformed,
// or disagrees with the layout's parameter count or param_fingerprint.
ParamLayout checkpoint_param_layout(const CheckpointManifest& m, const std::string& step_dir);

// --- the optimizers' checkpoints (what `shardlab run` uses) ---
class IShardedOptimizer;

// The layout `opt` writes checkpoints on, and what a checkpoint must match to load into it.
CheckpointLayout checkpoint_layout(IShardedOptimizer& opt);

// save_rank_checkpoint of `opt`'s view and progress at step opt.steps_done(); returns the step
// directory. Collective over `comm`, the communicator `opt` was built on.
std::string save_checkpoint(Communicator& comm, IShardedOptimizer& opt, const std::string& dir,
                            int keep);

// load_rank_checkpoint into `opt`, then restore_progress: `opt` continues where the checkpoint
// left off, on its own strategy and layout. Returns the checkpoint's manifest. Collective.
CheckpointManifest load_checkpoint(Communicator& comm, IShardedOptimizer& opt,
                                   const std::string& step_or_dir);

}  // namespace shardlab
