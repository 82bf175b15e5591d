#include "engine/checkpoint/shard_file.h"

#include <fmt/format.h>

#include <cstring>
#include <fstream>

#include "engine/core/bytes.h"
#include "engine/core/display_text.h"
#include "engine/core/error.h"
#include "engine/core/json_limits.h"

namespace shardlab {

namespace {

constexpr char kMagic[8] = {'S', 'L', 'S', 'H', 'R', 'D', '2', '\0'};
constexpr uint32_t kMaxHeader = 1u << 30;
// No model has 2^50 parameters; bounding indices keeps every sum below overflow.
constexpr int64_t kMaxElements = int64_t{1} << 50;

// An integer JSON value in [lo, hi] (FormatError naming `what` otherwise: no fractions, no
// silent narrowing).
int64_t integer(const nlohmann::json& v, const char* what, int64_t lo, int64_t hi) {
  SL_ENFORCE_T(FormatError, v.is_number_integer(), "{} is not an integer", what);
  if (v.is_number_unsigned())
    SL_ENFORCE_T(FormatError, v.get<uint64_t>() <= static_cast<uint64_t>(hi), "{} {} is too large",
                 what, v.get<uint64_t>());
  const auto x = v.get<int64_t>();
  SL_ENFORCE_T(FormatError, x >= lo && x <= hi, "{} {} is out of range [{}, {}]", what, x, lo, hi);
  return x;
}

// Exactly 8 hex digits, as encode_shard writes a CRC-32.
uint32_t parse_crc(const std::string& hex) {
  SL_ENFORCE_T(
      FormatError,
      hex.size() == 8 && hex.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos,
      "crc32 '{}' is not 8 hex digits", display_text(hex));
  return static_cast<uint32_t>(std::stoul(hex, nullptr, 16));
}

std::string hex(uint32_t v) {
  return fmt::format("{:08x}", v);
}

// The first problem of `runs` (sorted, disjoint, non-empty, non-negative), or "".
std::string runs_problem(const std::vector<GlobalRun>& runs) {
  int64_t end = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const GlobalRun& r = runs[i];
    if (r.begin < 0 || r.count <= 0 || r.count > kMaxElements - r.begin)
      return fmt::format("run {} is [{}, +{}): must start at >= 0, hold >= 1 element and end by {}",
                         i, r.begin, r.count, kMaxElements);
    if (i > 0 && r.begin < end)
      return fmt::format("run {} starts at {}, before the end {} of the run before it", i, r.begin,
                         end);
    end = r.begin + r.count;
  }
  return {};
}

// `shown`: the file's path as messages show it (display_text()).
void read_exact(std::ifstream& in, const std::string& shown, uint64_t at, void* out, size_t n,
                const std::string& what) {
  in.clear();
  in.seekg(static_cast<std::streamoff>(at));
  in.read(static_cast<char*>(out), static_cast<std::streamsize>(n));
  SL_ENFORCE_T(FormatError, in.gcount() == static_cast<std::streamsize>(n),
               "{}: truncated while reading {} (needs {} bytes at {})", shown, what, n, at);
}

}  // namespace

int64_t ShardHeader::elements() const {
  int64_t n = 0;
  for (const GlobalRun& r : runs) n += r.count;
  return n;
}

const ShardTensor* ShardHeader::find(const std::string& name) const {
  for (const ShardTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::vector<uint8_t> encode_shard(
    const ShardHeader& header,
    const std::vector<std::pair<std::string, std::span<const float>>>& tensors) {
  const std::string problem = runs_problem(header.runs);
  SL_ENFORCE(problem.empty(), "encode_shard: {}", problem);
  const int64_t n = header.elements();
  nlohmann::json runs = nlohmann::json::array();
  for (const GlobalRun& r : header.runs) runs.push_back({r.begin, r.count});
  nlohmann::json list = nlohmann::json::array();
  uint64_t offset = 0;
  for (const auto& [name, values] : tensors) {
    SL_ENFORCE(static_cast<int64_t>(values.size()) == n,
               "encode_shard: tensor {} has {} values, the runs hold {}", display_text(name),
               values.size(), n);
    const uint32_t crc =
        crc32_of(reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(float));
    list.push_back({{"name", name}, {"offset", offset}, {"count", n}, {"crc32", hex(crc)}});
    offset += values.size() * sizeof(float);
  }
  const nlohmann::json j = {{"rank", header.rank},
                            {"step", header.step},
                            {"progress", header.progress},
                            {"runs", std::move(runs)},
                            {"tensors", std::move(list)}};
  const std::string text = j.dump();
  ByteWriter w(text.size() + offset + 32);
  w.bytes(kMagic, 8);
  w.pod(static_cast<uint32_t>(text.size()));
  w.bytes(text.data(), text.size());
  w.pod(crc32_of(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  for (const auto& [name, values] : tensors) w.bytes(values.data(), values.size() * sizeof(float));
  return std::move(w.out());
}

ShardHeader read_shard_header(const std::string& path, uint64_t file_bytes) {
  const std::string shown = display_text(path, kMaxDisplayPathBytes);  // in messages
  std::ifstream in(path, std::ios::binary);
  SL_ENFORCE_T(IoError, in.good(), "{}: cannot open the shard", shown);
  char magic[8];
  read_exact(in, shown, 0, magic, 8, "the magic");
  SL_ENFORCE_T(FormatError, std::memcmp(magic, kMagic, 6) == 0 && magic[7] == '\0',
               "{}: not a ShardLab checkpoint shard (bad magic)", shown);
  SL_ENFORCE_T(FormatError, magic[6] == kMagic[6],
               "{}: shard format {} is not supported (this build reads format 2)", shown,
               magic[6] >= '0' && magic[6] <= '9' ? std::string(1, magic[6]) : std::string("?"));
  uint32_t len = 0;
  read_exact(in, shown, 8, &len, 4, "the header length");
  SL_ENFORCE_T(FormatError, len <= kMaxHeader && 16ull + len <= file_bytes,
               "{}: header length {} does not fit the {} bytes of the file", shown, len,
               file_bytes);
  std::string text(len, '\0');
  read_exact(in, shown, 12, text.data(), len, "the header");
  uint32_t crc = 0;
  read_exact(in, shown, 12 + len, &crc, 4, "the header checksum");
  const uint32_t actual = crc32_of(reinterpret_cast<const uint8_t*>(text.data()), text.size());
  SL_ENFORCE_T(FormatError, crc == actual,
               "{}: checksum mismatch in the header (stored crc32 {}, computed {}): the shard is "
               "corrupt",
               shown, hex(crc), hex(actual));
  ShardHeader h;
  h.data_start = 16ull + len;
  try {
    // Bounded before parsing (engine/core/json_limits.h): "progress" is copied (recursively) into
    // the header, so its nesting must be too.
    if (const auto problem = json_text_problem(text))
      SL_THROW(FormatError, "{}", problem->to_string());
    const nlohmann::json j = nlohmann::json::parse(text);
    SL_ENFORCE_T(FormatError, j.is_object(), "not a JSON object");
    h.rank = static_cast<int>(integer(j.at("rank"), "rank", 0, INT32_MAX));
    h.step = integer(j.at("step"), "step", 0, INT64_MAX);
    h.progress = j.at("progress");
    SL_ENFORCE_T(FormatError, j.at("runs").is_array() && j.at("tensors").is_array(),
                 "runs and tensors must be arrays");
    for (const auto& r : j.at("runs")) {
      SL_ENFORCE_T(FormatError, r.is_array() && r.size() == 2, "a run is not [begin, count]");
      h.runs.push_back({integer(r[0], "a run's begin", INT64_MIN, INT64_MAX),
                        integer(r[1], "a run's count", INT64_MIN, INT64_MAX)});
    }
    for (const auto& t : j.at("tensors")) {
      ShardTensor st;
      st.name = t.at("name").get<std::string>();
      st.offset = static_cast<uint64_t>(integer(t.at("offset"), "a tensor's offset", 0, INT64_MAX));
      st.count = integer(t.at("count"), "a tensor's count", 0, INT64_MAX);
      st.crc32 = parse_crc(t.at("crc32").get<std::string>());
      SL_ENFORCE_T(FormatError, h.find(st.name) == nullptr, "tensor {} is listed twice",
                   display_text(st.name));
      h.tensors.push_back(std::move(st));
    }
  } catch (const Error& e) {
    SL_THROW(FormatError, "{}: malformed header: {}", shown, e.what());
  } catch (const std::exception& e) {
    SL_THROW(FormatError, "{}: malformed header: {}", shown, e.what());
  }
  const std::string problem = runs_problem(h.runs);
  SL_ENFORCE_T(FormatError, problem.empty(), "{}: malformed header: {}", shown, problem);
  // The tensors lie back to back after the header, as encode_shard writes them (so every data
  // byte is under some tensor's CRC), and inside the file (no multiplication can overflow: n is
  // bounded by the file's size first).
  const int64_t n = h.elements();
  const uint64_t avail = file_bytes - h.data_start;
  SL_ENFORCE_T(FormatError, static_cast<uint64_t>(n) <= avail / 4 || h.tensors.empty(),
               "{}: truncated: its runs cover {} elements, more than the {} data bytes hold", shown,
               n, avail);
  uint64_t expected = 0;
  for (const ShardTensor& t : h.tensors) {
    SL_ENFORCE_T(FormatError, t.count == n,
                 "{}: tensor {} holds {} values but the runs cover {} elements", shown,
                 display_text(t.name), t.count, n);
    SL_ENFORCE_T(FormatError, t.offset == expected,
                 "{}: malformed header: tensor {} starts at data offset {}, expected {}", shown,
                 display_text(t.name), t.offset, expected);
    SL_ENFORCE_T(FormatError,
                 t.offset <= avail && static_cast<uint64_t>(n) <= (avail - t.offset) / 4,
                 "{}: truncated: tensor {} ends past the {} bytes of the file", shown,
                 display_text(t.name), file_bytes);
    expected += static_cast<uint64_t>(n) * 4;
  }
  SL_ENFORCE_T(FormatError, expected == avail,
               "{}: {} bytes after the header, but its tensors hold {}: the shard is corrupt",
               shown, avail, expected);
  return h;
}

std::vector<float> read_shard_tensor(const std::string& path, const ShardHeader& header,
                                     const std::string& name) {
  const std::string shown = display_text(path, kMaxDisplayPathBytes);  // in messages
  const std::string shown_name = display_text(name);
  const ShardTensor* t = header.find(name);
  SL_ENFORCE_T(FormatError, t != nullptr, "{}: holds no tensor {}", shown, shown_name);
  std::vector<float> values(static_cast<size_t>(t->count));
  std::ifstream in(path, std::ios::binary);
  SL_ENFORCE_T(IoError, in.good(), "{}: cannot open the shard", shown);
  read_exact(in, shown, header.data_start + t->offset, values.data(), values.size() * sizeof(float),
             shown_name);
  const uint32_t crc =
      crc32_of(reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(float));
  SL_ENFORCE_T(FormatError, crc == t->crc32,
               "{}: checksum mismatch in tensor {} (stored crc32 {}, computed {}): the shard is "
               "corrupt",
               shown, shown_name, hex(t->crc32), hex(crc));
  return values;
}

}  // namespace shardlab
