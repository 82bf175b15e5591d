#include "engine/parallel/rank_checkpoint.h"

#include <fmt/format.h>

#include <cstring>
#include <set>

#include "engine/checkpoint/checkpoint_store.h"
#include "engine/core/error.h"
#include "engine/core/memory.h"

namespace shardlab {

namespace {

enum ErrorCode : uint32_t { kOk = 0, kInvalid, kFormat, kIo, kTimeout, kInternal, kOther };

// Integers through float collectives as bit patterns (the collectives only move them here).
float as_float(uint32_t v) {
  float f = 0;
  std::memcpy(&f, &v, sizeof f);
  return f;
}
uint32_t as_u32(float f) {
  uint32_t v = 0;
  std::memcpy(&v, &f, sizeof v);
  return v;
}

}  // namespace

void agree_or_throw(Communicator& comm, const std::function<void()>& fn) {
  uint32_t code = kOk;
  std::string message;
  try {
    fn();
  } catch (const InvalidArgument& e) {
    code = kInvalid;
    message = e.what();
  } catch (const FormatError& e) {
    code = kFormat;
    message = e.what();
  } catch (const IoError& e) {
    code = kIo;
    message = e.what();
  } catch (const TimeoutError& e) {
    code = kTimeout;
    message = e.what();
  } catch (const InternalError& e) {
    code = kInternal;
    message = e.what();
  } catch (const std::exception& e) {
    code = kOther;
    message = e.what();
  }
  const float mine = as_float(code);
  Buffer all = make_buffer(MemCategory::comm, comm.size());
  comm.all_gather(std::span<const float>(&mine, 1), all);
  int first = -1;
  for (int r = 0; r < comm.size() && first < 0; ++r)
    if (as_u32(all[static_cast<size_t>(r)]) != kOk) first = r;
  if (first < 0) return;
  // The failing rank's message, to every rank.
  float len = as_float(static_cast<uint32_t>(message.size()));
  comm.broadcast(std::span<float>(&len, 1), first);
  const size_t n = as_u32(len);
  Buffer text = make_buffer(MemCategory::comm, static_cast<int64_t>((n + 3) / 4));
  if (comm.rank() == first && n > 0) std::memcpy(text.data(), message.data(), n);
  if (!text.empty()) comm.broadcast(text, first);
  std::string agreed(n, '\0');
  if (n > 0) std::memcpy(agreed.data(), text.data(), n);
  switch (as_u32(all[static_cast<size_t>(first)])) {
    case kInvalid:
      SL_THROW(InvalidArgument, "{}", agreed);
    case kFormat:
      SL_THROW(FormatError, "{}", agreed);
    case kIo:
      SL_THROW(IoError, "{}", agreed);
    case kTimeout:
      SL_THROW(TimeoutError, "{}", agreed);
    case kInternal:
      SL_THROW(InternalError, "{}", agreed);
    default:
      SL_THROW(Error, "{}", agreed);
  }
}

std::string save_rank_checkpoint(Communicator& comm, const std::string& dir, int64_t step,
                                 const CheckpointLayout& layout, std::span<const uint8_t> state,
                                 int keep) {
  agree_or_throw(comm, [&] {
    if (comm.rank() == 0) prepare_step(dir, step);
  });
  ShardEntry entry;
  agree_or_throw(comm, [&] { entry = write_shard(dir, step, comm.rank(), state); });
  // Each rank's entry as a fixed record: rank, size (low, high 32 bits), CRC-32.
  const float record[4] = {as_float(static_cast<uint32_t>(entry.rank)),
                           as_float(static_cast<uint32_t>(entry.bytes & 0xffffffffu)),
                           as_float(static_cast<uint32_t>(entry.bytes >> 32)),
                           as_float(entry.crc32)};
  Buffer all = make_buffer(MemCategory::comm, 4 * static_cast<int64_t>(comm.size()));
  comm.all_gather(record, all);
  agree_or_throw(comm, [&] {
    if (comm.rank() != 0) return;
    CheckpointManifest m;
    m.step = step;
    m.strategy = layout.strategy;
    m.world_size = layout.world_size;
    m.pp = layout.pp;
    m.tp = layout.tp;
    m.dp = layout.dp;
    m.layout = layout.layout;
    for (int r = 0; r < comm.size(); ++r) {
      const float* rec = all.data() + 4 * static_cast<size_t>(r);
      ShardEntry e;
      e.rank = static_cast<int>(as_u32(rec[0]));
      e.file = shard_file_name(e.rank);
      e.bytes =
          static_cast<uint64_t>(as_u32(rec[1])) | (static_cast<uint64_t>(as_u32(rec[2])) << 32);
      e.crc32 = as_u32(rec[3]);
      m.shards.push_back(std::move(e));
    }
    commit(dir, m, keep);
  });
  return step_dir(dir, step);
}

std::string layout_differences(const CheckpointManifest& m, const CheckpointLayout& mine) {
  std::vector<std::string> diffs;
  auto differ = [&diffs](const std::string& what, const auto& theirs, const auto& ours) {
    if (theirs != ours)
      diffs.push_back(fmt::format("{}: checkpoint {}, this job {}", what, theirs, ours));
  };
  differ("parallel.strategy", m.strategy, mine.strategy);
  differ("parallel.world_size", m.world_size, mine.world_size);
  differ("parallel.pp", m.pp, mine.pp);
  differ("parallel.tp", m.tp, mine.tp);
  differ("parallel.dp", m.dp, mine.dp);
  std::set<std::string> keys;
  if (m.layout.is_object())
    for (const auto& item : m.layout.items()) keys.insert(item.key());
  if (mine.layout.is_object())
    for (const auto& item : mine.layout.items()) keys.insert(item.key());
  const nlohmann::json none = "none";
  for (const std::string& k : keys) {
    const nlohmann::json& a = m.layout.is_object() && m.layout.contains(k) ? m.layout[k] : none;
    const nlohmann::json& b =
        mine.layout.is_object() && mine.layout.contains(k) ? mine.layout[k] : none;
    if (a != b) differ("model layout " + k, a.dump(), b.dump());
  }
  std::string out;
  for (const std::string& d : diffs) out += (out.empty() ? "" : "; ") + d;
  return out;
}

std::vector<uint8_t> load_rank_checkpoint(Communicator& comm, const std::string& step_or_dir,
                                          const CheckpointLayout& mine,
                                          CheckpointManifest* manifest) {
  std::vector<uint8_t> bytes;
  CheckpointManifest m;
  agree_or_throw(comm, [&] {
    const std::string sd = find_checkpoint(step_or_dir);
    m = read_manifest(sd);
    const std::string diff = layout_differences(m, mine);
    SL_ENFORCE(diff.empty(),
               "{}: cannot resume this job from it: {}; resharding is not supported yet (resume "
               "with the layout it was written on)",
               sd, diff);
    bytes = read_shard(sd, m, comm.rank());
  });
  if (manifest) *manifest = std::move(m);
  return bytes;
}

}  // namespace shardlab
