#include "engine/parallel/rank_state.h"

#include <algorithm>
#include <cstring>

#include "engine/core/error.h"
#include "engine/core/memory.h"

namespace shardlab::parallel_detail {

namespace {

constexpr uint32_t kVersion = 1;

}  // namespace

std::vector<uint8_t> write_rank_state(const RankStateFormat& format, IShardedOptimizer& opt,
                                      std::span<const float> held,
                                      const std::function<void(ByteWriter&)>& header) {
  const std::vector<uint8_t> state = opt.wrapped_optimizer().serialize();
  const TrainingProgress p = opt.progress();
  ByteWriter w(held.size() * 4 + state.size() + 256);
  w.bytes(format.magic, 8);
  w.pod(kVersion);
  header(w);
  w.pod(p.steps_done);
  w.pod(static_cast<uint8_t>(p.has_sampler));
  w.pod(p.sampler.epoch);
  w.pod(p.sampler.index);
  w.pod(p.early.best);
  w.pod(p.early.without_gain);
  w.pod(p.early.seen);
  w.pod(static_cast<uint8_t>(p.early.stop));
  w.floats(held);
  w.pod(static_cast<int64_t>(state.size()));
  w.bytes(state.data(), state.size());
  w.checksum();
  return std::move(w.out());
}

void read_rank_state(const RankStateFormat& format, std::span<const uint8_t> bytes,
                     IShardedOptimizer& opt, std::span<float> held,
                     const std::function<void(ByteReader&)>& check_header) {
  const char* what = format.what;
  ByteReader r(bytes, what);
  r.verify_checksum();
  const uint8_t* m = r.take(8, "magic");
  SL_ENFORCE_T(FormatError, std::memcmp(m, format.magic, 8) == 0,
               "{}: not a ShardLab {} (bad magic)", what, what);
  const auto version = r.pod<uint32_t>("version");
  SL_ENFORCE_T(FormatError, version == kVersion,
               "{}: format version {} is not supported (this build reads version {})", what,
               version, kVersion);
  check_header(r);
  TrainingProgress p;
  p.steps_done = r.pod<int64_t>("steps");
  p.has_sampler = r.pod<uint8_t>("sampler flag") != 0;
  p.sampler.epoch = r.pod<int64_t>("sampler epoch");
  p.sampler.index = r.pod<int64_t>("sampler index");
  p.early.best = r.pod<double>("best eval");
  p.early.without_gain = r.pod<int64_t>("evals without gain");
  p.early.seen = r.pod<int64_t>("evals seen");
  p.early.stop = r.pod<uint8_t>("early stop") != 0;
  Buffer params = make_buffer(MemCategory::comm, static_cast<int64_t>(held.size()));
  r.floats(params, "held parameters");
  const auto n = r.pod<int64_t>("optimizer state length");
  SL_ENFORCE_T(FormatError, n >= 0 && static_cast<size_t>(n) == r.left(),
               "{}: optimizer state length {} does not match the {} bytes left", what, n, r.left());
  const uint8_t* state = r.take(static_cast<size_t>(n), "optimizer state");
  // Everything checked; the optimizer checks its own bytes before changing anything.
  Optimizer& base = opt.wrapped_optimizer();
  base.deserialize(std::span<const uint8_t>(state, static_cast<size_t>(n)));
  std::copy(params.begin(), params.end(), held.begin());
  p.optimizer_steps = base.steps();  // as deserialize() just set it
  opt.restore_progress(p);
}

}  // namespace shardlab::parallel_detail
