#include "engine/checkpoint/rank_checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "engine/checkpoint/checkpoint_store.h"
#include "engine/core/display_text.h"
#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/model/model_file.h"
#include "engine/checkpoint/checkpoint_shards.h"
#include "engine/sharding/sharded_optimizer_interface.h"
#include "engine/strategies/strategies.h"

namespace shardlab {

namespace {

enum ErrorCode : uint32_t { kOk = 0, kInvalid, kFormat, kIo, kTimeout, kInternal, kOther };

// Integers through float collectives as bit patterns (the collectives only move them here).
float as_float(uint32_t v) {
  return std::bit_cast<float>(v);
}
uint32_t as_u32(float f) {
  return std::bit_cast<uint32_t>(f);
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
                                 const CheckpointLayout& layout, const CheckpointView& view,
                                 const TrainingProgress& progress, int keep) {
  agree_or_throw(comm, [&] {
    if (comm.rank() == 0) prepare_step(dir, step);
  });
  ShardEntry entry;
  agree_or_throw(comm, [&] {
    const std::vector<uint8_t> bytes = encode_rank_shard(comm.rank(), step, view, progress);
    entry = write_shard(dir, step, comm.rank(), bytes);
  });
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
  std::set<std::string> keys;
  if (m.layout.is_object())
    for (const auto& item : m.layout.items()) keys.insert(item.key());
  if (mine.layout.is_object())
    for (const auto& item : mine.layout.items()) keys.insert(item.key());
  const nlohmann::json none = "none";
  for (const std::string& k : keys) {
    // Names and shapes: param_fingerprint already compares them (and older checkpoints lack them).
    if (k == kLayoutTensorsKey) continue;
    const nlohmann::json& a = m.layout.is_object() && m.layout.contains(k) ? m.layout[k] : none;
    const nlohmann::json& b =
        mine.layout.is_object() && mine.layout.contains(k) ? mine.layout[k] : none;
    if (a != b)
      diffs.push_back(fmt::format("model layout {}: checkpoint {}, this job {}", display_text(k),
                                  display_text(a.dump()), display_text(b.dump())));
  }
  std::string out;
  for (const std::string& d : diffs) out += (out.empty() ? "" : "; ") + d;
  return out;
}

std::string resharding(const CheckpointManifest& m, const CheckpointLayout& mine) {
  if (m.strategy == mine.strategy && m.world_size == mine.world_size && m.pp == mine.pp &&
      m.tp == mine.tp && m.dp == mine.dp)
    return {};
  return fmt::format("{} on {} ranks ({}x{}x{}) -> {} on {} ranks ({}x{}x{})",
                     display_text(m.strategy), m.world_size, m.pp, m.tp, m.dp, mine.strategy,
                     mine.world_size, mine.pp, mine.tp, mine.dp);
}

TrainingProgress load_rank_checkpoint(Communicator& comm, const std::string& step_or_dir,
                                      const CheckpointLayout& mine, const CheckpointView& view,
                                      CheckpointManifest* manifest) {
  CheckpointManifest m;
  TrainingProgress progress;
  std::vector<float> held(view.held.size());
  std::vector<std::pair<std::span<float>, std::vector<float>>> state;
  agree_or_throw(comm, [&] {
    const std::string sd = find_checkpoint(step_or_dir);
    m = read_manifest(sd);
    const std::string diff = layout_differences(m, mine);
    SL_ENFORCE(diff.empty(), "{}: cannot resume this job from it: {}", sd, diff);
    ShardSet shards(sd, m, m.layout.at("params").get<int64_t>());
    progress = shards.progress();
    std::copy(view.held.begin(), view.held.end(), held.begin());  // keeps padding as it is
    shards.read("param", view.held_map, held);
    for (auto& [name, array] : view.state) {
      std::vector<float> values(array.begin(), array.end());
      shards.read(name, view.owned_map, values);
      state.emplace_back(array, std::move(values));
    }
  });
  // Every rank has read everything: only now does anything change.
  std::copy(held.begin(), held.end(), view.held.begin());
  for (auto& [array, values] : state) std::copy(values.begin(), values.end(), array.begin());
  if (view.store) view.store();  // a device rank's copies back onto its device
  if (manifest) *manifest = std::move(m);
  return progress;
}

std::vector<float> read_checkpoint_tensor(const std::string& step_or_dir, const std::string& name,
                                          CheckpointManifest* manifest,
                                          TrainingProgress* progress) {
  const std::string sd = find_checkpoint(step_or_dir);
  CheckpointManifest m = read_manifest(sd);
  SL_ENFORCE_T(FormatError,
               m.layout.is_object() && m.layout.contains("params") &&
                   m.layout["params"].is_number_integer() && m.layout["params"].get<int64_t>() >= 0,
               "{}: the manifest's layout does not give the parameter count", sd);
  const auto n = m.layout["params"].get<int64_t>();
  // Every element is in some shard's param tensor: more than the shards' bytes is a lie.
  uint64_t bytes = 0;
  for (const ShardEntry& e : m.shards) bytes += e.bytes;
  SL_ENFORCE_T(FormatError, static_cast<uint64_t>(n) <= bytes / 4,
               "{}: the manifest's layout gives {} parameters, more than its shards' {} bytes hold",
               sd, n, bytes);
  ShardSet shards(sd, m, n);
  std::vector<float> params(static_cast<size_t>(n));
  shards.read(name, identity_map(n), params);
  if (manifest) *manifest = std::move(m);
  if (progress) *progress = shards.progress();
  return params;
}

namespace {

std::string fingerprint_hex(const ParamLayout& layout) {
  return fmt::format("{:08x}", model_layout_fingerprint(layout));
}

// What a checkpoint must match to load (any strategy and topology may read it): the model, the
// base optimizer and its state arrays, and the global batch (the data position counts batches).
// Plus, described but not compared (kLayoutTensorsKey), every parameter's name and shape in
// layout order: what `shardlab checkpoint consolidate` names a safetensors file's tensors by.
nlohmann::json model_identity(const ShardedOptions& o, const ParamLayout& full, Optimizer& opt) {
  nlohmann::json state = nlohmann::json::array();
  for (const std::string& s : opt.state_names()) state.push_back(s);
  nlohmann::json tensors = nlohmann::json::array();
  for (const ParamInfo& p : full.params())
    tensors.push_back({{"name", p.name}, {"shape", p.shape}});
  return {{"model", o.model.kind},
          {"params", full.size()},
          {"param_fingerprint", fingerprint_hex(full)},
          {kLayoutTensorsKey, std::move(tensors)},
          {"optimizer", o.optimizer.name},
          {"optimizer_state", std::move(state)},
          {"batch_size", o.train.batch_size}};
}

}  // namespace

ParamLayout checkpoint_param_layout(const CheckpointManifest& m, const std::string& step_dir) {
  const nlohmann::json& l = m.layout;
  SL_ENFORCE_T(
      FormatError, l.is_object() && l.contains(kLayoutTensorsKey),
      "{}: the manifest does not list the parameters' names and shapes (a checkpoint "
      "written before ShardLab recorded them); consolidate it to a .slm model file instead",
      step_dir);
  const nlohmann::json& list = l[kLayoutTensorsKey];
  SL_ENFORCE_T(FormatError, list.is_array(), "{}: the manifest's layout {} is not an array",
               step_dir, kLayoutTensorsKey);
  ParamLayout layout;
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& t = list[i];
    bool ok = t.is_object() && t.contains("name") && t["name"].is_string() && t.contains("shape") &&
              t["shape"].is_array();
    Shape shape;
    int64_t numel = 1;  // capped so that neither it nor the layout's size can overflow
    constexpr int64_t kCap = int64_t(1) << 50;
    if (ok)
      for (const nlohmann::json& d : t["shape"]) {
        ok = ok && d.is_number_integer() && d.get<int64_t>() >= 0 &&
             (d.get<int64_t>() == 0 || numel <= kCap / d.get<int64_t>());
        if (!ok) break;
        shape.push_back(d.get<int64_t>());
        numel *= d.get<int64_t>();
      }
    ok = ok && layout.size() <= kCap - numel;
    SL_ENFORCE_T(FormatError, ok,
                 "{}: the manifest's layout {}[{}] is not {{\"name\": string, \"shape\": [sizes]}}",
                 step_dir, kLayoutTensorsKey, i);
    try {
      layout.add(t["name"].get<std::string>(), shape, 0);
    } catch (const InvalidArgument& e) {
      SL_THROW(FormatError, "{}: the manifest's layout {}[{}]: {}", step_dir, kLayoutTensorsKey, i,
               e.what());
    }
  }
  const nlohmann::json params = l.contains("params") ? l["params"] : nlohmann::json();
  SL_ENFORCE_T(FormatError, params.is_number_integer() && params.get<int64_t>() == layout.size(),
               "{}: the manifest's parameter names and shapes hold {} parameters, its layout "
               "gives {}",
               step_dir, layout.size(), display_text(params.dump()));
  const nlohmann::json fp =
      l.contains("param_fingerprint") ? l["param_fingerprint"] : nlohmann::json();
  SL_ENFORCE_T(FormatError, fp.is_string() && fp.get<std::string>() == fingerprint_hex(layout),
               "{}: the manifest's parameter names and shapes do not match its param_fingerprint",
               step_dir);
  return layout;
}

CheckpointLayout checkpoint_layout(IShardedOptimizer& opt) {
  CheckpointLayout l;
  l.strategy = opt.sharding_configuration().strategy;
  l.world_size = opt.world_size();
  l.pp = opt.topology().pp();
  l.tp = opt.topology().tp();
  l.dp = opt.topology().dp();
  l.layout = model_identity(opt.options(), opt.full_layout(), opt.wrapped_optimizer());
  return l;
}

std::string save_checkpoint(Communicator& comm, IShardedOptimizer& opt, const std::string& dir,
                            int keep) {
  return save_rank_checkpoint(comm, dir, opt.steps_done(), checkpoint_layout(opt),
                              opt.checkpoint_view(), opt.progress(), keep);
}

CheckpointManifest load_checkpoint(Communicator& comm, IShardedOptimizer& opt,
                                   const std::string& step_or_dir) {
  CheckpointManifest m;
  const TrainingProgress p =
      load_rank_checkpoint(comm, step_or_dir, checkpoint_layout(opt), opt.checkpoint_view(), &m);
  opt.restore_progress(p);
  return m;
}

}  // namespace shardlab
