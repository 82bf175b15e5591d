// HybridShardedOptimizer's rank state (serialize/deserialize) and checkpoint view.
//
// Format, version 1 (little-endian), in ShardedOptimizerBase's frame:
//   magic "SLHYBRD\0", u32 version, str strategy, str schedule, i32 pp, i32 tp, i32 dp, i32 rank,
//   i64 micro-batches, i64 bucket elements, i64 local params, u32 local layout CRC, i64 batch
//   size, then the frame's progress, local params, base optimizer state and CRC.
#include <cstring>

#include "engine/core/bytes.h"
#include "engine/core/error.h"
#include "engine/hybrid/hybrid_impl.h"
#include "engine/model/model_file.h"
#include "engine/sharding/holdings.h"
#include "engine/strategies/strategies.h"

namespace shardlab {

namespace {

constexpr char kMagic[8] = {'S', 'L', 'H', 'Y', 'B', 'R', 'D', '\0'};
constexpr const char* kWhat = "hybrid state";

}  // namespace

CheckpointView HybridShardedOptimizer::checkpoint_view() {
  Impl& im = *impl_;
  const ParamLayout& local = local_layout();
  CheckpointView v;
  v.optimizer = optimizer_.get();
  view_held_and_state(v, im.stage->device(), im.stage->params().first(local.size()));
  v.held_map = tp_map(im.stage->slices(), local, full_layout());
  const bool ddp = im.dp_sync->strategy() == "ddp";
  // Optimizer state index -> local flat index: the whole slice (ddp) or this dp rank's chunks.
  const IndexMap state_to_local =
      ddp ? identity_map(local.size()) : shard_map(im.dp_sync->layout(), im.coord.dp);
  v.owned_map = compose(state_to_local, v.held_map);
  // One writer per element: dp rank 0 under ddp, and tp rank 0 for the replicated parameters.
  if (!ddp || im.coord.dp == 0)
    v.write_map = im.coord.tp == 0
                      ? v.owned_map
                      : compose(state_to_local, tp_map(im.stage->slices(), local, full_layout(),
                                                       /*skip_replicated=*/true));
  return v;
}

std::vector<std::vector<IndexRange>> HybridShardedOptimizer::comm_units() {
  // A unit is a range of this rank's local (tensor-sliced, stage's) flat buffer: map it through
  // the slices to the full model's indices.
  const IndexMap to_global = tp_map(impl_->stage->slices(), local_layout(), full_layout());
  std::vector<std::vector<IndexRange>> out;
  for (const ShardUnit& u : impl_->dp_sync->layout().units()) {
    IndexMap part;
    for (const IndexRun& r : to_global) {
      const int64_t b = std::max(r.local, u.begin),
                    e = std::min(r.local + r.count, u.begin + u.size);
      if (b < e) part.push_back({b, r.global + (b - r.local), e - b});
    }
    out.push_back(global_ranges(part));
  }
  return out;
}

std::span<float> HybridShardedOptimizer::held_params() {
  // Host memory: the cpu device's (serialize() and deserialize() run on cpu; checkpoints go
  // through checkpoint_view() on every device).
  PipelineStage& stage = *impl_->stage;
  return {host_address(stage.device(), stage.params().data()),
          static_cast<size_t>(local_layout().size())};
}

ShardedOptimizerBase::StateFormat HybridShardedOptimizer::state_format() const {
  return {kMagic, kWhat};
}

void HybridShardedOptimizer::write_state_header(ByteWriter& w) {
  w.str(options_.sharding.strategy);
  w.str(options_.sharding.schedule);
  w.pod(static_cast<int32_t>(topo_.pp()));
  w.pod(static_cast<int32_t>(topo_.tp()));
  w.pod(static_cast<int32_t>(topo_.dp()));
  w.pod(static_cast<int32_t>(rank()));
  w.pod(options_.sharding.micro_batches);
  w.pod(parallel_detail::bucket_elements(options_.sharding));
  w.pod(local_layout().size());
  w.pod(model_layout_fingerprint(local_layout()));
  w.pod(options_.train.batch_size);
}

void HybridShardedOptimizer::check_state_header(ByteReader& r) {
  const std::string strategy = r.str("strategy");
  const std::string schedule = r.str("schedule");
  const auto pp = r.pod<int32_t>("pp");
  const auto tp = r.pod<int32_t>("tp");
  const auto dp = r.pod<int32_t>("dp");
  const auto their_rank = r.pod<int32_t>("rank");
  const auto micro = r.pod<int64_t>("micro-batches");
  const auto bucket = r.pod<int64_t>("bucket elements");
  const auto params = r.pod<int64_t>("parameter count");
  const auto fp = r.pod<uint32_t>("parameter layout");
  const auto batch = r.pod<int64_t>("batch size");
  SL_ENFORCE(
      pp == topo_.pp() && tp == topo_.tp() && dp == topo_.dp(),
      "{}: written by a {}x{}x{} (pp x tp x dp) job, this one is {}x{}x{}; serialize() is one "
      "rank's state in its own layout: to change the layout, resume from a checkpoint "
      "(rank_checkpoint.h), which reshards",
      kWhat, pp, tp, dp, topo_.pp(), topo_.tp(), topo_.dp());
  SL_ENFORCE(strategy == options_.sharding.strategy,
             "{}: written with parallel.strategy {}, this run uses {}", kWhat, strategy,
             options_.sharding.strategy);
  SL_ENFORCE(their_rank == rank(), "{}: written by rank {}, loaded on rank {}", kWhat, their_rank,
             rank());
  SL_ENFORCE(params == local_layout().size() && fp == model_layout_fingerprint(local_layout()),
             "{}: written for other parameters than this rank's ({} elements; this rank holds "
             "{})",
             kWhat, params, local_layout().size());
  SL_ENFORCE(bucket == parallel_detail::bucket_elements(options_.sharding),
             "{}: written with a different parallel.bucket_mb (this run uses {})", kWhat,
             options_.sharding.bucket_mb);
  SL_ENFORCE(batch == options_.train.batch_size && micro == options_.sharding.micro_batches,
             "{}: written with train.batch_size {} and parallel.micro_batches {}, this run uses "
             "{} and {}",
             kWhat, batch, micro, options_.train.batch_size, options_.sharding.micro_batches);
  (void)schedule;  // the schedule does not change what a rank holds
}

}  // namespace shardlab
