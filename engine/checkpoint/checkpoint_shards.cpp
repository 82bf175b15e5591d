#include "engine/checkpoint/checkpoint_shards.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>

#include "engine/core/error.h"

namespace shardlab {

namespace {

uint64_t double_bits(double d) {
  return std::bit_cast<uint64_t>(d);
}
double bits_double(uint64_t v) {
  return std::bit_cast<double>(v);
}

}  // namespace

nlohmann::json to_json(const TrainingProgress& p) {
  return {{"steps_done", p.steps_done},
          {"has_sampler", p.has_sampler},
          {"sampler_epoch", p.sampler.epoch},
          {"sampler_index", p.sampler.index},
          {"early_best_bits", double_bits(p.early.best)},
          {"early_without_gain", p.early.without_gain},
          {"early_seen", p.early.seen},
          {"early_stop", p.early.stop},
          {"optimizer_steps", p.optimizer_steps}};
}

TrainingProgress progress_from_json(const nlohmann::json& j, const std::string& source) {
  try {
    TrainingProgress p;
    p.steps_done = j.at("steps_done").get<int64_t>();
    p.has_sampler = j.at("has_sampler").get<bool>();
    p.sampler.epoch = j.at("sampler_epoch").get<int64_t>();
    p.sampler.index = j.at("sampler_index").get<int64_t>();
    p.early.best = bits_double(j.at("early_best_bits").get<uint64_t>());
    p.early.without_gain = j.at("early_without_gain").get<int64_t>();
    p.early.seen = j.at("early_seen").get<int64_t>();
    p.early.stop = j.at("early_stop").get<bool>();
    p.optimizer_steps = j.at("optimizer_steps").get<int64_t>();
    SL_ENFORCE_T(FormatError, p.steps_done >= 0 && p.optimizer_steps >= 0, "negative step counts");
    return p;
  } catch (const std::exception& e) {
    SL_THROW(FormatError, "{}: malformed training position: {}", source, e.what());
  }
}

// This rank's shard file: the elements of view.write_map, their parameters and optimizer state.
std::vector<uint8_t> encode_rank_shard(int rank, int64_t step, const CheckpointView& view,
                                       const TrainingProgress& progress) {
  const IndexMap writes = sorted_by_global(view.write_map);
  const IndexMap held = sorted_by_global(view.held_map);
  ShardHeader h;
  h.rank = rank;
  h.step = step;
  h.progress = to_json(progress);
  for (const IndexRun& r : writes) {
    if (!h.runs.empty() && h.runs.back().begin + h.runs.back().count == r.global)
      h.runs.back().count += r.count;
    else
      h.runs.push_back({r.global, r.count});
  }
  const auto n = static_cast<size_t>(mapped_elements(writes));
  std::vector<std::vector<float>> values;
  std::vector<std::pair<std::string, std::span<const float>>> tensors;
  values.emplace_back(n);
  size_t at = 0;
  for (const IndexRun& r : writes) {
    const int64_t covered =
        for_each_overlap(held, r.global, r.count, [&](int64_t l, int64_t g, int64_t k) {
          std::copy_n(view.held.data() + l, k, values.back().data() + at + (g - r.global));
        });
    SL_ENFORCE_T(InternalError, covered == r.count,
                 "checkpoint: rank {} owns elements [{}, {}) but holds only {} of their "
                 "parameters",
                 rank, r.global, r.global + r.count, covered);
    at += static_cast<size_t>(r.count);
  }
  tensors.emplace_back("param", values.back());
  for (auto& [name, state] : view.state) {
    values.emplace_back(n);
    std::vector<float>& v = values.back();
    at = 0;
    for (const IndexRun& r : writes) {
      SL_ENFORCE_T(InternalError, r.local >= 0 && r.local + r.count <= std::ssize(state),
                   "checkpoint: rank {} writes {} elements [{}, {}) of its {}", rank, name, r.local,
                   r.local + r.count, state.size());
      std::copy_n(state.data() + r.local, r.count, v.data() + at);
      at += static_cast<size_t>(r.count);
    }
    tensors.emplace_back(name, v);
  }
  // The spans in `tensors` point into `values`, which no longer grows.
  for (size_t i = 0; i < tensors.size(); ++i) tensors[i].second = values[i];
  return encode_shard(h, tensors);
}

ShardSet::ShardSet(std::string step_dir, const CheckpointManifest& m, int64_t total)
    : dir_(std::move(step_dir)) {
  for (const ShardEntry& e : m.shards) {
    const std::string path = (std::filesystem::path(dir_) / e.file).string();
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    SL_ENFORCE_T(IoError, !ec, "{}: missing shard for rank {} ({})", path, e.rank, ec.message());
    SL_ENFORCE_T(FormatError, size >= e.bytes, "{}: truncated ({} of {} bytes)", path, size,
                 e.bytes);
    SL_ENFORCE_T(FormatError, size == e.bytes,
                 "{}: {} bytes but the manifest lists {}: the shard is corrupt", path, size,
                 e.bytes);
    ShardHeader h = read_shard_header(path, e.bytes);
    SL_ENFORCE_T(FormatError, h.rank == e.rank && h.step == m.step,
                 "{}: written by rank {} for step {}, but the manifest lists it for rank {} at "
                 "step {}",
                 path, h.rank, h.step, e.rank, m.step);
    const int64_t end = h.runs.empty() ? 0 : h.runs.back().begin + h.runs.back().count;
    SL_ENFORCE_T(FormatError, end <= total, "{}: holds elements up to {}, but the model has {}",
                 path, end, total);
    int64_t offset = 0;
    for (const GlobalRun& r : h.runs) {
      pieces_.push_back({r.begin, r.count, static_cast<int>(paths_.size()), offset});
      offset += r.count;
    }
    paths_.push_back(path);
    headers_.push_back(std::move(h));
  }
  SL_ENFORCE_T(FormatError, !headers_.empty(), "{}: the manifest lists no shards", dir_);
  progress_ = progress_from_json(headers_.front().progress, paths_.front());
  for (size_t i = 1; i < headers_.size(); ++i)
    SL_ENFORCE_T(FormatError, headers_[i].progress == headers_.front().progress,
                 "{}: its training position differs from {}'s: the shards are from different runs",
                 paths_[i], paths_.front());
  // Disjoint: replicas that wrote the same elements count once (the first one listed).
  std::stable_sort(pieces_.begin(), pieces_.end(),
                   [](const Piece& a, const Piece& b) { return a.global < b.global; });
  std::vector<Piece> disjoint;
  int64_t covered_to = 0;
  for (Piece p : pieces_) {
    if (p.global + p.count <= covered_to) continue;
    if (p.global < covered_to) {
      const int64_t cut = covered_to - p.global;
      p.global += cut;
      p.offset += cut;
      p.count -= cut;
    }
    covered_to = p.global + p.count;
    disjoint.push_back(p);
  }
  pieces_ = std::move(disjoint);
}

void ShardSet::read(const std::string& name, const IndexMap& map, std::span<float> dst) {
  if (name != cached_name_) {
    cache_.clear();  // one name's tensors at a time: the peak is one tensor of every shard
    cached_name_ = name;
  }
  for (const IndexRun& run : map) {
    SL_ENFORCE_T(InternalError, run.local >= 0 && run.local + run.count <= std::ssize(dst),
                 "checkpoint read: a run of {} lies outside its {} local elements", name,
                 dst.size());
    int64_t pos = run.global;
    const int64_t end = run.global + run.count;
    while (pos < end) {
      const auto it =
          std::upper_bound(pieces_.begin(), pieces_.end(), pos,
                           [](int64_t g, const Piece& p) { return g < p.global + p.count; });
      const bool found = it != pieces_.end() && it->global <= pos;
      const int64_t gap_end = it == pieces_.end() ? end : std::min(end, it->global);
      SL_ENFORCE_T(FormatError, found,
                   "{}: no shard holds elements [{}, {}) of {} (the checkpoint is incomplete "
                   "or was written for another model)",
                   dir_, pos, gap_end, name);
      const int64_t n = std::min(end, it->global + it->count) - pos;
      const std::vector<float>& block = tensor(it->shard, name);
      std::copy_n(block.data() + it->offset + (pos - it->global), n,
                  dst.data() + run.local + (pos - run.global));
      pos += n;
    }
  }
}

const std::vector<float>& ShardSet::tensor(int shard, const std::string& name) {
  auto it = cache_.find(shard);
  if (it == cache_.end())
    it = cache_
             .emplace(shard, read_shard_tensor(paths_[static_cast<size_t>(shard)],
                                               headers_[static_cast<size_t>(shard)], name))
             .first;
  return it->second;
}

}  // namespace shardlab
