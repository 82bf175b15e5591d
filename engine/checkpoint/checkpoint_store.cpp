#include "engine/checkpoint/checkpoint_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <system_error>

#include "engine/core/atomic_file.h"
#include "engine/core/bytes.h"
#include "engine/core/display_text.h"
#include "engine/core/error.h"

namespace fs = std::filesystem;

namespace shardlab {

namespace {

constexpr const char* kManifest = "manifest.json";
constexpr const char* kLatest = "latest";

std::string step_name(int64_t step) {
  return fmt::format("step-{:08d}", step);
}

// A path as messages show it (a directory or a shard file name with a control character in it).
std::string shown(const std::string& path) {
  return display_text(path, kMaxDisplayPathBytes);
}

std::string join(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}

// The step of a directory named exactly as step_dir() names it, so that step_dir(parent, step)
// finds the same directory again.
std::optional<int64_t> parse_step_name(const std::string& name) {
  if (name.size() < 13 || name.rfind("step-", 0) != 0 || name.size() > 5 + 18) return std::nullopt;
  int64_t step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    step = step * 10 + (name[i] - '0');
  }
  if (step_name(step) != name) return std::nullopt;
  return step;
}

bool is_file(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

// A symbolic link (not followed). The store never follows one it finds inside a checkpoint
// directory: a step-* link or a shard link could point anywhere, and pruning would then delete
// files outside the directory, loading read them.
bool is_symlink(const std::string& path) {
  std::error_code ec;
  return fs::is_symlink(fs::symlink_status(path, ec));
}

struct StepDir {
  int64_t step;
  std::string path;
  bool complete;
};

// Every step-* directory under `dir`, by step, oldest first.
std::vector<StepDir> list_steps(const std::string& dir) {
  std::vector<StepDir> steps;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    if (it->is_symlink(ec2) || !it->is_directory(ec2)) continue;  // links are not followed
    if (auto step = parse_step_name(it->path().filename().string())) {
      const std::string path = it->path().string();
      steps.push_back({*step, path, is_file(join(path, kManifest))});
    }
  }
  SL_ENFORCE_T(IoError, !ec, "{}: cannot list the checkpoint directory ({})", shown(dir),
               ec.message());
  std::sort(steps.begin(), steps.end(),
            [](const StepDir& a, const StepDir& b) { return a.step < b.step; });
  return steps;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SL_ENFORCE_T(IoError, in.good(), "{}: cannot open", shown(path));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  SL_ENFORCE_T(IoError, !in.bad(), "{}: read failed", shown(path));
  return text;
}

// Removes a checkpoint directory, its manifest first: a crash half-way leaves an incomplete
// directory, never a "complete" one with shards missing.
void remove_step(const std::string& path) {
  if (is_symlink(path)) return;  // (list_steps skips them; never delete through one)
  std::error_code ec;
  fs::remove(join(path, kManifest), ec);
  if (!ec) fs::remove_all(path, ec);
  SL_ENFORCE_T(IoError, !ec, "{}: cannot remove the old checkpoint ({})", shown(path),
               ec.message());
}

void prune(const std::string& dir, int64_t committed, int keep_last) {
  std::vector<StepDir> complete;
  bool removed = false;
  for (const auto& s : list_steps(dir)) {
    if (s.step == committed) continue;
    if (s.complete) {
      complete.push_back(s);
    } else if (s.step < committed) {
      remove_step(s.path);
      removed = true;
    }
  }
  if (keep_last > 0) {
    // Newest first; directories from beyond the committed step (an abandoned run this one
    // resumed before) rank below every older one.
    std::sort(complete.begin(), complete.end(), [&](const StepDir& a, const StepDir& b) {
      const bool a_stale = a.step > committed, b_stale = b.step > committed;
      return a_stale != b_stale ? b_stale : a.step > b.step;
    });
    // The committed checkpoint is one of the keep_last.
    for (size_t i = size_t(keep_last - 1); i < complete.size(); ++i) {
      remove_step(complete[i].path);
      removed = true;
    }
  }
  if (removed) fsync_directory(dir);
}

const ShardEntry& entry_for(const std::string& sd, const CheckpointManifest& m, int rank) {
  auto it = std::find_if(m.shards.begin(), m.shards.end(),
                         [&](const ShardEntry& e) { return e.rank == rank; });
  SL_ENFORCE_T(IoError, it != m.shards.end(), "{}: the manifest lists no shard for rank {}",
               shown(sd), rank);
  return *it;
}

std::string strip_trailing_separators(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

}  // namespace

std::string step_dir(const std::string& dir, int64_t step) {
  SL_ENFORCE(step >= 0, "checkpoint step must be >= 0, got {}", step);
  return join(dir, step_name(step));
}

void prepare_step(const std::string& dir, int64_t step) {
  const std::string sd = step_dir(dir, step);
  std::error_code ec;
  fs::create_directories(sd, ec);
  SL_ENFORCE_T(IoError, !ec, "{}: cannot create the checkpoint directory ({})", shown(sd),
               ec.message());
  const std::string manifest = join(sd, kManifest);
  if (fs::remove(manifest, ec)) fsync_directory(sd);
  SL_ENFORCE_T(IoError, !ec, "{}: cannot remove the old manifest ({})", shown(manifest),
               ec.message());
}

ShardEntry write_shard(const std::string& dir, int64_t step, int rank,
                       std::span<const uint8_t> bytes) {
  SL_ENFORCE(rank >= 0, "checkpoint shard rank must be >= 0, got {}", rank);
  const std::string sd = step_dir(dir, step);
  std::error_code ec;
  fs::create_directories(sd, ec);
  SL_ENFORCE_T(IoError, !ec, "{}: cannot create the checkpoint directory ({})", shown(sd),
               ec.message());
  ShardEntry e;
  e.rank = rank;
  e.file = shard_file_name(rank);
  e.bytes = bytes.size();
  e.crc32 = crc32_of(bytes.data(), bytes.size());
  write_file_atomic(join(sd, e.file), bytes);
  return e;
}

void commit(const std::string& dir, const CheckpointManifest& m, int keep_last,
            const CheckpointWriteOptions& options) {
  const std::string problem = manifest_problem(m);
  SL_ENFORCE(problem.empty(), "checkpoint manifest: {}", problem);
  const std::string sd = step_dir(dir, m.step);
  for (const auto& s : m.shards) {
    const std::string path = join(sd, s.file);
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    SL_ENFORCE_T(IoError, !ec, "{}: missing shard for rank {} ({})", shown(path), s.rank,
                 ec.message());
    SL_ENFORCE_T(FormatError, size == s.bytes,
                 "{}: {} bytes on disk but the manifest lists {} for rank {}", shown(path), size,
                 s.bytes, s.rank);
  }
  auto stage = [&](const char* name) {
    if (options.before_stage) options.before_stage(name);
  };
  stage("write-manifest");
  write_file_atomic(join(sd, kManifest), to_json(m).dump(2) + "\n");
  stage("write-latest");
  write_file_atomic(join(dir, kLatest), step_name(m.step) + "\n");
  stage("prune");
  prune(dir, m.step, keep_last);
}

std::string find_checkpoint(const std::string& step_or_dir) {
  const std::string p = strip_trailing_separators(step_or_dir);
  std::error_code ec;
  SL_ENFORCE_T(IoError, fs::is_directory(p, ec), "{}: no such checkpoint directory", shown(p));
  if (is_file(join(p, kManifest)) || parse_step_name(fs::path(p).filename().string())) return p;
  if (is_file(join(p, kLatest))) {
    std::string name = read_text(join(p, kLatest));
    name.erase(name.find_last_not_of(" \t\r\n") + 1);
    // A latest that names no complete checkpoint (a hand edit, a removed directory) is ignored.
    if (parse_step_name(name) && !is_symlink(join(p, name)) &&
        is_file(join(join(p, name), kManifest)))
      return join(p, name);
  }
  const auto steps = list_steps(p);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it)
    if (it->complete) return it->path;
  SL_THROW(IoError, "{}: no complete checkpoint (no manifest.json in any step-* directory)",
           shown(p));
}

CheckpointManifest read_manifest(const std::string& step_or_dir) {
  const std::string sd = find_checkpoint(step_or_dir);
  const std::string path = join(sd, kManifest);
  SL_ENFORCE_T(IoError, is_file(path), "{}: incomplete checkpoint (no manifest.json)", shown(sd));
  CheckpointManifest m = parse_manifest(read_text(path), path);
  const std::string name = fs::path(sd).filename().string();
  if (auto step = parse_step_name(name))
    SL_ENFORCE_T(FormatError, *step == m.step, "{}: step {} does not match its directory {}",
                 shown(path), m.step, name);
  return m;
}

std::vector<uint8_t> read_shard(const std::string& step_dir, const CheckpointManifest& m,
                                int rank) {
  const ShardEntry& e = entry_for(step_dir, m, rank);
  SL_ENFORCE_T(
      FormatError,
      !e.file.empty() && e.file.find('/') == std::string::npos && e.file != "." && e.file != "..",
      "{}: the manifest names shard '{}' for rank {}, which is not a file name in the "
      "checkpoint directory",
      shown(step_dir), display_text(e.file), rank);
  const std::string path = join(step_dir, e.file);
  SL_ENFORCE_T(IoError, !is_symlink(path),
               "{}: the shard for rank {} is a symbolic link (not followed)", shown(path), rank);
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  SL_ENFORCE_T(IoError, !ec, "{}: missing shard for rank {} ({})", shown(path), rank, ec.message());
  SL_ENFORCE_T(FormatError, size >= e.bytes, "{}: truncated ({} of {} bytes)", shown(path), size,
               e.bytes);
  SL_ENFORCE_T(FormatError, size == e.bytes,
               "{}: {} bytes but the manifest lists {}: the shard is corrupt", shown(path), size,
               e.bytes);
  std::vector<uint8_t> bytes(e.bytes);
  std::ifstream in(path, std::ios::binary);
  SL_ENFORCE_T(IoError, in.good(), "{}: cannot open the shard for rank {}", shown(path), rank);
  in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()));
  SL_ENFORCE_T(IoError, in.gcount() == std::streamsize(bytes.size()), "{}: read {} of {} bytes",
               shown(path), in.gcount(), bytes.size());
  const uint32_t crc = crc32_of(bytes.data(), bytes.size());
  SL_ENFORCE_T(FormatError, crc == e.crc32,
               "{}: checksum mismatch (manifest crc32 {:08x}, file {:08x}): the shard is corrupt",
               shown(path), e.crc32, crc);
  return bytes;
}

void verify(const std::string& step_or_dir) {
  const std::string sd = find_checkpoint(step_or_dir);
  const CheckpointManifest m = read_manifest(sd);
  for (const auto& s : m.shards) read_shard(sd, m, s.rank);
}

std::string describe(const CheckpointManifest& m) {
  uint64_t total = 0;
  for (const auto& s : m.shards) total += s.bytes;
  std::string layout = m.layout.is_null() ? "none" : m.layout.dump();
  if (layout.size() > 100) layout = layout.substr(0, 97) + "...";
  std::string out = fmt::format(
      "checkpoint step {} (format {})\n"
      "strategy: {}\n"
      "topology: pp {} x tp {} x dp {} = world {}\n"
      "layout:   {}\n"
      "shards:   {} files, {} bytes in all, checksum crc32\n",
      m.step, m.format_version, m.strategy.empty() ? "(none)" : display_text(m.strategy), m.pp,
      m.tp, m.dp, m.world_size, layout, m.shards.size(), total);
  out += fmt::format("  {:>6}  {:<20} {:>14}  {}\n", "rank", "file", "bytes", "crc32");
  for (const auto& s : m.shards)
    out += fmt::format("  {:>6}  {:<20} {:>14}  {:08x}\n", s.rank, display_text(s.file), s.bytes,
                       s.crc32);
  return out;
}

}  // namespace shardlab
