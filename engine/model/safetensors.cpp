#include "engine/model/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>

#include "engine/core/atomic_file.h"
#include "engine/core/display_text.h"
#include "engine/core/error.h"
#include "engine/core/json_limits.h"

namespace shardlab {

// The buffer is the model's floats as they lie in memory; the format is little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors.cpp assumes little-endian");

namespace {

using ojson = nlohmann::ordered_json;

constexpr const char* kMetadataKey = "__metadata__";

// Bytes per element of safetensors' dtypes; 0 for a name it does not define.
uint64_t dtype_size(std::string_view dtype) {
  static const std::map<std::string_view, uint64_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

// A non-negative JSON integer that fits int64, or -1.
int64_t non_negative(const ojson& v) {
  if (v.is_number_unsigned())
    return v.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()) ? v.get<int64_t>()
                                                                              : -1;
  if (v.is_number_integer()) return v.get<int64_t>() >= 0 ? v.get<int64_t>() : -1;
  return -1;
}

// The header text of `header` ('{' ... '}'), parsed; duplicate top-level names refused (the format
// forbids them, and nlohmann would keep only the last one silently).
ojson parse_header_json(std::string_view text, const std::string& what) {
  SL_ENFORCE_T(FormatError, !text.empty() && text.front() == '{',
               "{}: the header does not start with '{{' (not a safetensors file?)", what);
  if (const auto problem = json_text_problem(text))
    SL_THROW(FormatError, "{}: header: {}", what, problem->to_string());
  std::set<std::string> names;
  std::string duplicate;
  const ojson::parser_callback_t track = [&](int depth, ojson::parse_event_t event, ojson& parsed) {
    if (event == ojson::parse_event_t::key && depth == 1) {
      const std::string name = parsed.get<std::string>();
      if (!names.insert(name).second && duplicate.empty()) duplicate = name;
    }
    return true;
  };
  ojson j;
  try {
    j = ojson::parse(text, track);
  } catch (const nlohmann::json::exception& e) {
    std::string why = e.what();
    if (auto pos = why.find("] "); pos != std::string::npos) why = why.substr(pos + 2);
    SL_THROW(FormatError, "{}: the header is not valid JSON ({})", what, why);
  }
  SL_ENFORCE_T(FormatError, duplicate.empty(), "{}: the header names tensor '{}' twice", what,
               display_text(duplicate));
  SL_ENFORCE_T(FormatError, j.is_object(), "{}: the header is not a JSON object", what);
  return j;
}

SafetensorsTensor parse_tensor(const std::string& name, const ojson& v, const std::string& what) {
  const std::string shown = display_text(name);
  SL_ENFORCE_T(FormatError, v.is_object(), "{}: tensor '{}' is not an object", what, shown);
  SafetensorsTensor t;
  t.name = name;
  SL_ENFORCE_T(FormatError, v.contains("dtype") && v["dtype"].is_string(),
               "{}: tensor '{}' has no dtype string", what, shown);
  t.dtype = v["dtype"].get<std::string>();
  const uint64_t elem = dtype_size(t.dtype);
  SL_ENFORCE_T(FormatError, elem > 0, "{}: tensor '{}' has unknown dtype '{}'", what, shown,
               display_text(t.dtype));
  SL_ENFORCE_T(FormatError, v.contains("shape") && v["shape"].is_array(),
               "{}: tensor '{}' has no shape array", what, shown);
  uint64_t numel = 1;
  bool overflow = false;
  for (const ojson& d : v["shape"]) {
    const int64_t n = non_negative(d);
    SL_ENFORCE_T(FormatError, n >= 0, "{}: tensor '{}': shape {} holds a value that is not a size",
                 what, shown, display_text(v["shape"].dump()));
    t.shape.push_back(n);
    if (n != 0 && numel > std::numeric_limits<uint64_t>::max() / elem / uint64_t(n))
      overflow = true;
    else
      numel *= uint64_t(n);
  }
  const ojson& o = v.contains("data_offsets") ? v["data_offsets"] : ojson();
  SL_ENFORCE_T(FormatError,
               o.is_array() && o.size() == 2 && non_negative(o[0]) >= 0 &&
                   non_negative(o[1]) >= non_negative(o[0]),
               "{}: tensor '{}' has no data_offsets [begin, end] with begin <= end", what, shown);
  t.begin = uint64_t(non_negative(o[0]));
  t.end = uint64_t(non_negative(o[1]));
  SL_ENFORCE_T(FormatError, !overflow && t.end - t.begin == numel * elem,
               "{}: tensor '{}' holds {} bytes, its dtype {} and shape {} need {}", what, shown,
               t.end - t.begin, t.dtype, to_string(t.shape),
               overflow ? std::string("more than 2^64") : std::to_string(numel * elem));
  return t;
}

}  // namespace

bool is_safetensors_path(std::string_view path) {
  return path.ends_with(".safetensors");
}

std::vector<uint8_t> encode_safetensors(const ParamLayout& layout, std::span<const float> params,
                                        const SafetensorsMetadata& metadata) {
  SL_ENFORCE(static_cast<int64_t>(params.size()) == layout.size(),
             "safetensors: {} parameters given for a model of {}", params.size(), layout.size());
  ojson header = ojson::object();
  if (!metadata.empty()) {
    ojson m = ojson::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header[kMetadataKey] = std::move(m);
  }
  // Layout order: params are back to back, so each tensor's bytes are its flat range.
  int64_t next = 0;
  for (const ParamInfo& p : layout.params()) {
    SL_ENFORCE_T(InternalError, p.offset == next && p.numel == numel_of(p.shape),
                 "safetensors: parameter {} is not where the layout's order puts it", p.name);
    SL_ENFORCE(p.name != kMetadataKey, "safetensors: a parameter may not be named {}",
               kMetadataKey);
    const uint64_t begin = uint64_t(p.offset) * sizeof(float);
    header[p.name] = {{"dtype", "F32"},
                      {"shape", p.shape},
                      {"data_offsets", {begin, begin + uint64_t(p.numel) * sizeof(float)}}};
    next = p.offset + p.numel;
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');  // the buffer starts 8-byte aligned
  const uint64_t n = text.size();
  std::vector<uint8_t> out(8 + text.size() + params.size() * sizeof(float));
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, text.data(), text.size());
  if (!params.empty())
    std::memcpy(out.data() + 8 + text.size(), params.data(), params.size() * sizeof(float));
  return out;
}

void write_safetensors(const std::string& path, const ParamLayout& layout,
                       std::span<const float> params, const SafetensorsMetadata& metadata) {
  write_file_atomic(path, encode_safetensors(layout, params, metadata));
}

SafetensorsHeader parse_safetensors(std::span<const uint8_t> file, const std::string& what) {
  SL_ENFORCE_T(FormatError, file.size() >= 8,
               "{}: truncated ({} bytes; a safetensors file starts with an 8-byte header length)",
               what, file.size());
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  SL_ENFORCE_T(FormatError, n <= kMaxSafetensorsHeaderBytes,
               "{}: header length {} is over the limit of {} bytes (not a safetensors file?)", what,
               n, kMaxSafetensorsHeaderBytes);
  SL_ENFORCE_T(FormatError, n <= file.size() - 8,
               "{}: truncated (header length {}, but only {} bytes follow)", what, n,
               file.size() - 8);
  const ojson j = parse_header_json(
      std::string_view(reinterpret_cast<const char*>(file.data()) + 8, size_t(n)), what);
  SafetensorsHeader h;
  h.buffer_start = 8 + n;
  for (const auto& [name, v] : j.items()) {
    if (name == kMetadataKey) {
      SL_ENFORCE_T(FormatError, v.is_object(), "{}: __metadata__ is not an object", what);
      for (const auto& [k, s] : v.items()) {
        SL_ENFORCE_T(FormatError, s.is_string(), "{}: __metadata__ '{}' is not a string", what,
                     display_text(k));
        h.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    h.tensors.push_back(parse_tensor(name, v, what));
  }
  // The tensors cover the buffer exactly: sorted by begin, each starts where the previous ended.
  std::vector<const SafetensorsTensor*> by_begin;
  for (const SafetensorsTensor& t : h.tensors) by_begin.push_back(&t);
  std::stable_sort(by_begin.begin(), by_begin.end(),
                   [](const auto* a, const auto* b) { return a->begin < b->begin; });
  uint64_t at = 0;
  for (const SafetensorsTensor* t : by_begin) {
    SL_ENFORCE_T(FormatError, t->begin == at,
                 "{}: tensor '{}' starts at byte {} of the buffer, expected {} (gap or overlap)",
                 what, display_text(t->name), t->begin, at);
    at = t->end;
  }
  const uint64_t buffer = file.size() - h.buffer_start;
  SL_ENFORCE_T(FormatError, at <= buffer,
               "{}: truncated (its tensors need {} bytes of data, the file holds {})", what, at,
               buffer);
  SL_ENFORCE_T(FormatError, at == buffer,
               "{}: {} bytes after the last tensor (the buffer must hold only the tensors)", what,
               buffer - at);
  return h;
}

std::vector<float> decode_safetensors(std::span<const uint8_t> file, const ParamLayout& layout,
                                      const std::string& what) {
  const SafetensorsHeader h = parse_safetensors(file, what);
  std::map<std::string_view, const SafetensorsTensor*> by_name;
  for (const SafetensorsTensor& t : h.tensors) by_name[t.name] = &t;
  std::vector<float> out(static_cast<size_t>(layout.size()));
  for (const ParamInfo& p : layout.params()) {
    const auto it = by_name.find(p.name);
    SL_ENFORCE_T(FormatError, it != by_name.end(),
                 "{}: no tensor '{}' (a parameter of this model, shape {})", what,
                 display_text(p.name), to_string(p.shape));
    const SafetensorsTensor& t = *it->second;
    SL_ENFORCE_T(FormatError, t.dtype == "F32", "{}: tensor '{}' is {}, this model needs F32", what,
                 display_text(p.name), display_text(t.dtype));
    SL_ENFORCE_T(FormatError, t.shape == p.shape,
                 "{}: tensor '{}' has shape {}, this model's has shape {}", what,
                 display_text(p.name), to_string(t.shape), to_string(p.shape));
    if (p.numel > 0)
      std::memcpy(out.data() + p.offset, file.data() + h.buffer_start + t.begin,
                  size_t(p.numel) * sizeof(float));
    by_name.erase(it);
  }
  SL_ENFORCE_T(FormatError, by_name.empty(),
               "{}: tensor '{}' is not a parameter of this model ({} tensors in the file, {} "
               "parameters in the model)",
               what, by_name.empty() ? "" : display_text(by_name.begin()->first), h.tensors.size(),
               layout.params().size());
  return out;
}

std::vector<float> read_safetensors(const std::string& path, const ParamLayout& layout) {
  std::error_code ec;
  const std::string shown = display_text(path, kMaxDisplayPathBytes);
  SL_ENFORCE_T(IoError, std::filesystem::is_regular_file(path, ec),
               "cannot read safetensors file {}: {}", shown,
               std::filesystem::exists(path, ec) ? "not a regular file" : "no such file");
  std::ifstream in(path, std::ios::binary);
  SL_ENFORCE_T(IoError, in.good(), "cannot read safetensors file {}", shown);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  SL_ENFORCE_T(IoError, !in.bad(), "cannot read safetensors file {}", shown);
  return decode_safetensors(bytes, layout, "safetensors file " + shown);
}

}  // namespace shardlab
