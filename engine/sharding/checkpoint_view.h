// What a rank exposes to checkpoints: its parameters and base-optimizer state with where each
// element sits in the full model (element_map.h), and its training position. ShardedOptimizer
// and HybridShardedOptimizer both provide one (checkpoint_view(), progress(),
// restore_progress()), so rank_checkpoint.h writes and reads every strategy the same way and a
// checkpoint loads into any strategy and layout.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/data/sampler.h"
#include "engine/optim/optimizer.h"
#include "engine/sharding/element_map.h"
#include "engine/train/training_loop.h"

namespace shardlab {

// Where training stands; the same on every rank.
struct TrainingProgress {
  int64_t steps_done = 0;
  bool has_sampler = false;  // false before the first step (the sampler is built lazily)
  SamplerState sampler;      // global: independent of the world size
  EarlyStopState early;
  int64_t optimizer_steps = 0;  // the base optimizer's step count (Adam's bias correction)
};

// As JSON (doubles as their bit patterns, so they round-trip exactly), and back (FormatError
// naming the field).
nlohmann::json to_json(const TrainingProgress& p);
TrainingProgress progress_from_json(const nlohmann::json& j, const std::string& source);

struct CheckpointView {
  std::span<float> held;           // the parameters this rank holds at rest (host memory)
  IndexMap held_map;               // held index <-> global index
  Optimizer* optimizer = nullptr;  // the base optimizer, attached to the rank's range
  // Its state arrays by name, indexed like its range, in host memory: the arrays themselves on the
  // cpu device; on any other, host copies made when the view was made (then `store` puts them
  // back on the device after a checkpoint was read into them).
  std::vector<std::pair<std::string, std::span<float>>> state;
  IndexMap owned_map;  // optimizer state index <-> global index
  // The part of owned_map this rank writes: replicas (DDP ranks, tensor-parallel copies of
  // replicated parameters) write their elements once.
  IndexMap write_map;
  // A device rank's view is host copies (a counted copy each way, as a GPU stages through pinned
  // memory): `store` copies `held` and `state` back to the device; null on cpu. `staging` owns the
  // copies.
  std::function<void()> store;
  std::shared_ptr<void> staging;
};

}  // namespace shardlab
