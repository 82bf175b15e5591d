// The frame both rank-state formats share (ShardedOptimizer's "SLSHARD", sharded_state.cpp;
// HybridShardedOptimizer's "SLHYBRD", hybrid_state.cpp), written and read here once:
//
//   magic (8 bytes), u32 version 1, <the format's own header: what the state was written on>,
//   i64 steps done, u8 has sampler, i64 epoch, i64 index, f64 best eval, i64 evals without gain,
//   i64 evals seen, u8 early stop, floats held params, i64 n + n bytes base optimizer state,
//   u32 CRC-32 of all before (little-endian).
//
// Internal to engine/parallel.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/core/bytes.h"
#include "engine/parallel/sharded_optimizer_interface.h"

namespace shardlab::parallel_detail {

struct RankStateFormat {
  const char* magic;  // 8 bytes
  const char* what;   // in messages: "sharded state", "hybrid state"
};

// `opt`'s state: the frame around `header` (which writes the format's own fields), with `held`
// (the parameters the rank holds at rest), opt.progress() and the base optimizer's state.
std::vector<uint8_t> write_rank_state(const RankStateFormat& format, IShardedOptimizer& opt,
                                      std::span<const float> held,
                                      const std::function<void(ByteWriter&)>& header);

// Reads bytes written by write_rank_state into `opt`: the checksum, magic and version
// (FormatError), then `check_header`, which reads the format's own fields and throws
// InvalidArgument naming what differs from `opt`. Only once everything is read and checked are the
// base optimizer's state, `held` and the progress (restore_progress) replaced.
void read_rank_state(const RankStateFormat& format, std::span<const uint8_t> bytes,
                     IShardedOptimizer& opt, std::span<float> held,
                     const std::function<void(ByteReader&)>& check_header);

}  // namespace shardlab::parallel_detail
