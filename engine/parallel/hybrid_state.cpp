// HybridShardedOptimizer's rank state (serialize/deserialize).
//
// Format, version 1 (little-endian):
//   magic "SLHYBRD\0", u32 version, str strategy, str schedule, i32 pp, i32 tp, i32 dp, i32 rank,
//   i64 micro-batches, i64 bucket elements, i64 local params, u32 local layout CRC, i64 batch
//   size, i64 steps done, u8 has sampler, i64 epoch, i64 index, f64 best eval,
//   i64 evals without gain, i64 evals seen, u8 early stop, floats local params,
//   i64 n + n bytes base optimizer state, u32 CRC-32 of all before.
#include <cstring>

#include "engine/core/bytes.h"
#include "engine/core/error.h"
#include "engine/model/model_file.h"
#include "engine/parallel/hybrid_impl.h"
#include "engine/parallel/strategies.h"

namespace shardlab {

namespace {

constexpr char kMagic[8] = {'S', 'L', 'H', 'Y', 'B', 'R', 'D', '\0'};
constexpr uint32_t kVersion = 1;
constexpr const char* kWhat = "hybrid state";

}  // namespace

CheckpointView HybridShardedOptimizer::checkpoint_view() {
  Impl& im = *impl_;
  const ParamLayout& local = local_layout();
  CheckpointView v;
  v.held = im.stage->params().first(static_cast<size_t>(local.size()));
  v.optimizer = optimizer_.get();
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

TrainingProgress HybridShardedOptimizer::progress() const {
  const Impl& im = *impl_;
  TrainingProgress p;
  p.steps_done = steps_done_;
  p.has_sampler = im.sampler != nullptr || im.has_pending_sampler;
  p.sampler = im.sampler ? im.sampler->state() : im.pending_sampler;
  p.early = im.early;
  p.optimizer_steps = optimizer_->steps();
  return p;
}

void HybridShardedOptimizer::restore_progress(const TrainingProgress& p) {
  Impl& im = *impl_;
  optimizer_->restore_steps(p.optimizer_steps);
  steps_done_ = p.steps_done;
  im.early = p.early;
  if (!p.has_sampler) return;
  if (im.sampler) {
    im.sampler->set_state(p.sampler);
  } else {
    im.pending_sampler = p.sampler;
    im.has_pending_sampler = true;
  }
}

std::vector<uint8_t> HybridShardedOptimizer::serialize() {
  Impl& im = *impl_;
  const std::vector<uint8_t> opt = optimizer_->serialize();
  const auto local = im.stage->params().first(static_cast<size_t>(local_layout().size()));
  ByteWriter w(local.size() * 4 + opt.size() + 256);
  w.bytes(kMagic, 8);
  w.pod(kVersion);
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
  w.pod(steps_done_);
  const bool has_sampler = im.sampler != nullptr || im.has_pending_sampler;
  const SamplerState ss = im.sampler ? im.sampler->state() : im.pending_sampler;
  w.pod(static_cast<uint8_t>(has_sampler));
  w.pod(ss.epoch);
  w.pod(ss.index);
  w.pod(im.early.best);
  w.pod(im.early.without_gain);
  w.pod(im.early.seen);
  w.pod(static_cast<uint8_t>(im.early.stop));
  w.floats(local);
  w.pod(static_cast<int64_t>(opt.size()));
  w.bytes(opt.data(), opt.size());
  w.checksum();
  return std::move(w.out());
}

void HybridShardedOptimizer::deserialize(std::span<const uint8_t> bytes) {
  Impl& im = *impl_;
  ByteReader r(bytes, kWhat);
  r.verify_checksum();
  const uint8_t* m = r.take(8, "magic");
  SL_ENFORCE_T(FormatError, std::memcmp(m, kMagic, 8) == 0,
               "{}: not a ShardLab hybrid rank state (bad magic)", kWhat);
  const auto version = r.pod<uint32_t>("version");
  SL_ENFORCE_T(FormatError, version == kVersion,
               "{}: format version {} is not supported (this build reads version {})", kWhat,
               version, kVersion);
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
             "{}: written for other parameters than this rank's ({} elements; this rank holds {})",
             kWhat, params, local_layout().size());
  SL_ENFORCE(bucket == parallel_detail::bucket_elements(options_.sharding),
             "{}: written with a different parallel.bucket_mb (this run uses {})", kWhat,
             options_.sharding.bucket_mb);
  SL_ENFORCE(batch == options_.train.batch_size && micro == options_.sharding.micro_batches,
             "{}: written with train.batch_size {} and parallel.micro_batches {}, this run uses {} "
             "and {}",
             kWhat, batch, micro, options_.train.batch_size, options_.sharding.micro_batches);
  (void)schedule;  // the schedule does not change what a rank holds
  const auto steps = r.pod<int64_t>("steps");
  const bool has_sampler = r.pod<uint8_t>("sampler flag") != 0;
  SamplerState ss;
  ss.epoch = r.pod<int64_t>("sampler epoch");
  ss.index = r.pod<int64_t>("sampler index");
  EarlyStopState early;
  early.best = r.pod<double>("best eval");
  early.without_gain = r.pod<int64_t>("evals without gain");
  early.seen = r.pod<int64_t>("evals seen");
  early.stop = r.pod<uint8_t>("early stop") != 0;
  Buffer local = make_buffer(MemCategory::comm, params);
  r.floats(local, "parameters");
  const auto n = r.pod<int64_t>("optimizer state length");
  SL_ENFORCE_T(FormatError, n >= 0 && static_cast<size_t>(n) == r.left(),
               "{}: optimizer state length {} does not match the {} bytes left", kWhat, n,
               r.left());
  const uint8_t* opt = r.take(static_cast<size_t>(n), "optimizer state");
  optimizer_->deserialize(std::span<const uint8_t>(opt, static_cast<size_t>(n)));
  std::copy(local.begin(), local.end(), im.stage->params().begin());
  steps_done_ = steps;
  im.early = early;
  if (has_sampler) {
    if (im.sampler) {
      im.sampler->set_state(ss);
    } else {
      im.pending_sampler = ss;
      im.has_pending_sampler = true;
    }
  }
}

}  // namespace shardlab
