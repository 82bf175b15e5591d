#include "engine/checkpoint/manifest.h"

#include <fmt/format.h>

#include <limits>
#include <set>

#include "engine/core/display_text.h"
#include "engine/core/error.h"
#include "engine/core/json_limits.h"

namespace shardlab {

namespace {

const char* type_name(const nlohmann::json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number_float()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

// Type-checked field access; `where` is the field's path inside the manifest ("shards[2].bytes").
// `source` is the manifest's path as messages show it (display_text()).
class Fields {
 public:
  Fields(const nlohmann::json& obj, std::string source, std::string prefix)
      : obj_(obj), source_(std::move(source)), prefix_(std::move(prefix)) {}

  const nlohmann::json& at(const char* key) const {
    auto it = obj_.find(key);
    SL_ENFORCE_T(FormatError, it != obj_.end(), "{}: missing field '{}'", source_, name(key));
    return *it;
  }

  int64_t integer(const char* key, int64_t lo, int64_t hi) const {
    const auto& v = at(key);
    SL_ENFORCE_T(FormatError, v.is_number_integer(), "{}: field '{}' must be an integer, got {}",
                 source_, name(key), type_name(v));
    // Non-negative integers are stored unsigned; one above int64's range is out of any range.
    const bool fits = !v.is_number_unsigned() ||
                      v.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max());
    const int64_t x = fits ? v.get<int64_t>() : std::numeric_limits<int64_t>::max();
    SL_ENFORCE_T(FormatError, fits && x >= lo && x <= hi,
                 "{}: field '{}' must be in [{}, {}], got {}", source_, name(key), lo, hi,
                 v.dump());
    return x;
  }

  uint64_t unsigned_integer(const char* key) const {
    const auto& v = at(key);
    SL_ENFORCE_T(FormatError, v.is_number_unsigned(),
                 "{}: field '{}' must be a non-negative integer, got {}", source_, name(key),
                 v.is_number_integer() ? v.dump() : type_name(v));
    return v.get<uint64_t>();
  }

  std::string string(const char* key) const {
    const auto& v = at(key);
    SL_ENFORCE_T(FormatError, v.is_string(), "{}: field '{}' must be a string, got {}", source_,
                 name(key), type_name(v));
    return v.get<std::string>();
  }

  std::string name(const char* key) const { return prefix_ + key; }

 private:
  const nlohmann::json& obj_;
  std::string source_;
  std::string prefix_;
};

constexpr int64_t kIntMax = std::numeric_limits<int>::max();

// `source`: as messages show it.
uint32_t parse_crc(const std::string& s, const std::string& source, const std::string& field) {
  bool ok = s.size() == 8;
  uint32_t v = 0;
  for (char c : s) {
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) ok = false;
    v = (v << 4) | uint32_t(d & 0xf);
  }
  SL_ENFORCE_T(FormatError, ok, "{}: field '{}' must be 8 hex digits, got \"{}\"", source, field,
               display_text(s));
  return v;
}

bool plain_file_name(const std::string& f) {
  return !f.empty() && f != "." && f != ".." && f.find('/') == std::string::npos &&
         f.find('\\') == std::string::npos && f.find('\0') == std::string::npos;
}

}  // namespace

std::string shard_file_name(int rank) {
  return fmt::format("shard-{:05d}.bin", rank);
}

std::string manifest_problem(const CheckpointManifest& m) {
  if (m.format_version != CheckpointManifest::kFormatVersion)
    return fmt::format("format_version {} is not supported (this build reads {})", m.format_version,
                       CheckpointManifest::kFormatVersion);
  if (m.step < 0) return fmt::format("step: must be >= 0, got {}", m.step);
  if (m.pp < 1 || m.tp < 1 || m.dp < 1)
    return fmt::format("pp, tp, dp: must be >= 1, got {}, {}, {}", m.pp, m.tp, m.dp);
  if (m.world_size < 1 || int64_t(m.pp) * m.tp * m.dp != m.world_size)
    return fmt::format("world_size: must equal pp*tp*dp = {}*{}*{}, got {}", m.pp, m.tp, m.dp,
                       m.world_size);
  std::set<int> ranks;
  std::set<std::string> files;
  for (size_t i = 0; i < m.shards.size(); ++i) {
    const auto& s = m.shards[i];
    if (s.rank < 0 || s.rank >= m.world_size)
      return fmt::format("shards[{}].rank: must be in [0, {}), got {}", i, m.world_size, s.rank);
    if (!ranks.insert(s.rank).second)
      return fmt::format("shards[{}].rank: rank {} is listed twice", i, s.rank);
    if (!plain_file_name(s.file))
      return fmt::format("shards[{}].file: must be a plain file name, got \"{}\"", i,
                         display_text(s.file));
    if (s.file == "manifest.json" || !files.insert(s.file).second)
      return fmt::format("shards[{}].file: \"{}\" is used twice", i, display_text(s.file));
  }
  return {};
}

nlohmann::json to_json(const CheckpointManifest& m) {
  nlohmann::json shards = nlohmann::json::array();
  for (const auto& s : m.shards)
    shards.push_back({{"rank", s.rank},
                      {"file", s.file},
                      {"bytes", s.bytes},
                      {"crc32", fmt::format("{:08x}", s.crc32)}});
  return nlohmann::json{{"format_version", m.format_version},
                        {"step", m.step},
                        {"strategy", m.strategy},
                        {"world_size", m.world_size},
                        {"pp", m.pp},
                        {"tp", m.tp},
                        {"dp", m.dp},
                        {"layout", m.layout},
                        {"checksum", "crc32"},
                        {"shards", std::move(shards)}};
}

CheckpointManifest manifest_from_json(const nlohmann::json& j, const std::string& source) {
  const std::string shown = display_text(source, kMaxDisplayPathBytes);
  SL_ENFORCE_T(FormatError, j.is_object(), "{}: the manifest must be a JSON object, got {}", shown,
               type_name(j));
  const Fields f(j, shown, "");
  CheckpointManifest m;
  // The version first: a newer format may change every other field.
  m.format_version = int(f.integer("format_version", 0, kIntMax));
  SL_ENFORCE_T(FormatError, m.format_version == CheckpointManifest::kFormatVersion,
               "{}: format_version {} is not supported (this build reads {})", shown,
               m.format_version, CheckpointManifest::kFormatVersion);
  m.step = f.integer("step", 0, std::numeric_limits<int64_t>::max());
  m.strategy = f.string("strategy");
  m.world_size = int(f.integer("world_size", 1, kIntMax));
  m.pp = int(f.integer("pp", 1, kIntMax));
  m.tp = int(f.integer("tp", 1, kIntMax));
  m.dp = int(f.integer("dp", 1, kIntMax));
  m.layout = f.at("layout");
  const std::string checksum = f.string("checksum");
  SL_ENFORCE_T(FormatError, checksum == "crc32",
               "{}: checksum \"{}\" is not supported (this build reads \"crc32\")", shown,
               display_text(checksum));
  const auto& shards = f.at("shards");
  SL_ENFORCE_T(FormatError, shards.is_array(), "{}: field 'shards' must be an array, got {}", shown,
               type_name(shards));
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string prefix = fmt::format("shards[{}].", i);
    SL_ENFORCE_T(FormatError, shards[i].is_object(), "{}: field 'shards[{}]' must be an object",
                 shown, i);
    const Fields s(shards[i], shown, prefix);
    ShardEntry e;
    e.rank = int(s.integer("rank", 0, kIntMax));
    e.file = s.string("file");
    e.bytes = s.unsigned_integer("bytes");
    e.crc32 = parse_crc(s.string("crc32"), shown, s.name("crc32"));
    m.shards.push_back(std::move(e));
  }
  const std::string problem = manifest_problem(m);
  SL_ENFORCE_T(FormatError, problem.empty(), "{}: {}", shown, problem);
  return m;
}

CheckpointManifest parse_manifest(std::string_view text, const std::string& source) {
  const std::string shown = display_text(source, kMaxDisplayPathBytes);
  // Checked on the text before parsing (engine/core/json_limits.h): a layout nested 100,000 deep
  // would exhaust the stack of the first copy of it, and a number beyond double's range would
  // surface as the JSON library's exception.
  if (const auto problem = json_text_problem(text))
    SL_THROW(FormatError, "{}: {}", shown, problem->to_string());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // e.what() starts with "[json.exception.parse_error.101] "; the rest says where and why.
    std::string why = e.what();
    if (auto pos = why.find("] "); pos != std::string::npos) why = why.substr(pos + 2);
    SL_THROW(FormatError, "{}: not valid JSON ({})", shown, why);
  }
  return manifest_from_json(j, source);
}

}  // namespace shardlab
