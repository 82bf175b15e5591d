// ShardedOptimizer's persistence: serialize/deserialize of one rank's training state, model
// files with the full parameters, and synchronize_optimizer_state.
//
// Rank state format, version 1 (little-endian), in ShardedOptimizerBase's frame:
//   magic "SLSHARD\0", u32 version, str strategy, i32 world, i32 rank, i64 params,
//   i64 padded params, i64 shard, u32 unit-layout CRC, u32 parameter-layout CRC, i64 batch size,
//   then the frame's progress, held params, base optimizer state and CRC.
// Model files: engine/model/model_file.h.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine/core/bytes.h"
#include "engine/core/error.h"
#include "engine/model/model_file.h"
#include "engine/strategies/sharded_optimizer.h"
#include "engine/strategies/strategies.h"

namespace shardlab {

namespace {

constexpr char kMagic[8] = {'S', 'L', 'S', 'H', 'A', 'R', 'D', '\0'};

// CRC of how the flat parameters are cut into units (it depends on parallel.bucket_mb): a rank's
// shard is its chunk of every unit, so state written under another cut would be scrambled.
uint32_t units_fingerprint(const ShardLayout& layout) {
  if (layout.world() == 1) return 0;  // one rank owns every unit whole: the cut does not matter
  ByteWriter w;
  for (const ShardUnit& u : layout.units()) {
    w.pod(u.begin);
    w.pod(u.size);
    w.pod(u.padded);
  }
  return crc32_of(w.out().data(), w.out().size());
}

// Bytes through a float collective (broadcast only moves them, so any bit pattern survives).
Buffer bytes_as_floats(const std::vector<uint8_t>& bytes) {
  Buffer f = make_buffer(MemCategory::comm, static_cast<int64_t>((bytes.size() + 3) / 4));
  if (!bytes.empty()) std::memcpy(f.data(), bytes.data(), bytes.size());
  return f;
}

}  // namespace

namespace parallel_detail {

void write_model_file_collective(Communicator& comm, const std::string& path,
                                 const ParamLayout& layout, std::span<const float> full) {
  float ok = 1.0f;
  std::string error;
  if (comm.rank() == 0) {
    try {
      save_model_file(path, layout, full);  // safetensors for a .safetensors path
    } catch (const Error& e) {
      ok = 0.0f;
      error = e.what();
    }
  }
  comm.broadcast(std::span<float>(&ok, 1), 0);
  if (comm.rank() == 0 && ok == 0.0f) SL_THROW(IoError, "{}", error);
  SL_ENFORCE_T(IoError, ok != 0.0f, "rank 0 could not write model file {}", path);
}

void broadcast_optimizer_state(Communicator& comm, Optimizer& optimizer) {
  std::vector<uint8_t> bytes = comm.rank() == 0 ? optimizer.serialize() : std::vector<uint8_t>{};
  float len[2] = {static_cast<float>(bytes.size() % (1 << 20)),
                  static_cast<float>(bytes.size() >> 20)};
  comm.broadcast(len, 0);
  const size_t n = static_cast<size_t>(len[0]) + (static_cast<size_t>(len[1]) << 20);
  Buffer f = comm.rank() == 0 ? bytes_as_floats(bytes)
                              : make_buffer(MemCategory::comm, static_cast<int64_t>((n + 3) / 4));
  comm.broadcast(f, 0);
  if (comm.rank() != 0) {
    bytes.resize(n);
    std::memcpy(bytes.data(), f.data(), n);
    optimizer.deserialize(bytes);
  }
}

void check_optimizer_steps_agree(Communicator& comm, const Optimizer& optimizer) {
  // Sum and sum of squares equal to n*x and n*x^2 on every rank means zero variance.
  const auto x = static_cast<double>(optimizer.steps());
  const double mine[2] = {x, x * x};
  const std::vector<double> sum = sum_over_ranks(comm, mine);
  const double n = comm.size();
  SL_ENFORCE(sum[0] == n * x && sum[1] == n * x * x,
             "synchronize_optimizer_state: ranks of {} disagree on the optimizer step count (rank "
             "{} is at {})",
             comm.name(), comm.rank(), optimizer.steps());
}

}  // namespace parallel_detail

ShardedOptimizerBase::StateFormat ShardedOptimizer::state_format() const {
  return {kMagic, "sharded state"};
}

void ShardedOptimizer::write_state_header(ByteWriter& w) {
  w.str(options_.sharding.strategy);
  w.pod(static_cast<int32_t>(world_size()));
  w.pod(static_cast<int32_t>(rank()));
  w.pod(model_->num_params());
  w.pod(layout_.padded_total());
  w.pod(layout_.shard_size());
  w.pod(units_fingerprint(layout_));
  w.pod(model_layout_fingerprint(model_->layout()));
  w.pod(options_.train.batch_size);
}

void ShardedOptimizer::check_state_header(ByteReader& r) {
  const std::string strategy = r.str("strategy");
  const auto world = r.pod<int32_t>("world size");
  const auto their_rank = r.pod<int32_t>("rank");
  const auto params = r.pod<int64_t>("parameter count");
  const auto padded = r.pod<int64_t>("padded parameter count");
  const auto shard = r.pod<int64_t>("shard size");
  const auto units = r.pod<uint32_t>("unit layout");
  const auto params_fp = r.pod<uint32_t>("parameter layout");
  const auto batch = r.pod<int64_t>("batch size");
  const std::string mine = options_.sharding.strategy;
  SL_ENFORCE(strategy == mine && world == world_size(),
             "sharded state: written by strategy {} on world size {}, but this is strategy {} on "
             "world size {}; serialize() is one rank's state in its own layout: to change strategy "
             "or world size, resume from a checkpoint (rank_checkpoint.h), which reshards",
             strategy, world, mine, world_size());
  SL_ENFORCE(their_rank == rank(),
             "sharded state: written by rank {}, loaded on rank {} (each rank loads its own)",
             their_rank, rank());
  SL_ENFORCE(params == model_->num_params() && padded == layout_.padded_total() &&
                 shard == layout_.shard_size(),
             "sharded state: written for a model of {} parameters ({} padded, shard {}), this "
             "model has {} ({} padded, shard {})",
             params, padded, shard, model_->num_params(), layout_.padded_total(),
             layout_.shard_size());
  SL_ENFORCE(params_fp == model_layout_fingerprint(model_->layout()),
             "sharded state: written for a model whose parameter names or shapes differ from "
             "this one's");
  SL_ENFORCE(units == units_fingerprint(layout_),
             "sharded state: written with a different parallel.bucket_mb (this run uses {}); a "
             "ZeRO rank's shard is its chunk of every bucket, so it must be the same",
             options_.sharding.bucket_mb);
  SL_ENFORCE(batch == options_.train.batch_size,
             "sharded state: written with train.batch_size {}, this run uses {} (the data "
             "position would not match)",
             batch, options_.train.batch_size);
}

CheckpointView ShardedOptimizer::checkpoint_maps() {
  CheckpointView v;
  const std::string& s = options_.sharding.strategy;
  const int64_t n = model_->num_params();
  v.optimizer = optimizer_.get();
  if (s == "ddp") {
    // Every rank holds and updates everything: rank 0 writes.
    v.held_map = identity_map(n);
    v.owned_map = identity_map(n);
    if (rank() == 0) v.write_map = v.owned_map;
    return v;
  }
  v.owned_map = shard_map(layout_, rank());
  v.write_map = v.owned_map;
  // ZeRO-1/2 hold the whole parameters; FSDP its shard, indexed like its optimizer state.
  v.held_map = s == "fsdp" ? v.owned_map : identity_map(n);
  return v;
}

CheckpointView ShardedOptimizer::checkpoint_view() {
  CheckpointView v = checkpoint_maps();
  // The held parameters (the model's, or FSDP's shard) and the optimizer state.
  view_held_and_state(v, model_->device(), held_device_params());
  return v;
}

std::vector<std::vector<IndexRange>> ShardedOptimizer::comm_units() {
  // The flat buffer is the full model's: a unit's real elements are its global indices.
  std::vector<std::vector<IndexRange>> out;
  out.reserve(layout_.units().size());
  for (const ShardUnit& u : layout_.units()) out.push_back({{u.begin, u.begin + u.size}});
  return out;
}

void ShardedOptimizer::load_model(const std::string& path) {
  const std::vector<float> full = read_model_file(path, model_->layout());
  load_full_params(full);
}

void ShardedOptimizer::synchronize_optimizer_state() {
  const bool replicated = layout_.shard_size() == model_->num_params() || world_size() == 1 ||
                          options_.sharding.strategy == "ddp";
  if (replicated) {
    // DDP: every rank holds the whole state; rank 0's wins.
    parallel_detail::broadcast_optimizer_state(comm_, *optimizer_);
    return;
  }
  // Sharded: each rank owns different state; they must agree on where they are.
  SL_ENFORCE(optimizer_->range().size() == layout_.shard_size(),
             "synchronize_optimizer_state: rank {}'s optimizer holds {} elements, its shard is {}",
             rank(), optimizer_->range().size(), layout_.shard_size());
  parallel_detail::check_optimizer_steps_agree(comm_, *optimizer_);
}

}  // namespace shardlab
