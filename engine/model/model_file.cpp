#include "engine/model/model_file.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine/core/atomic_file.h"
#include "engine/core/bytes.h"
#include "engine/core/error.h"

namespace shardlab {

namespace {

constexpr char kMagic[8] = {'S', 'L', 'M', 'O', 'D', 'E', 'L', '\0'};
constexpr uint32_t kVersion = 1;

}  // namespace

uint32_t model_layout_fingerprint(const ParamLayout& layout) {
  ByteWriter w;
  for (const ParamInfo& p : layout.params()) {
    w.str(p.name);
    for (int64_t d : p.shape) w.pod(d);
  }
  return crc32_of(w.out().data(), w.out().size());
}

void write_model_file(const std::string& path, uint32_t fingerprint,
                      std::span<const float> params) {
  ByteWriter w(params.size() * 4 + 64);
  w.bytes(kMagic, 8);
  w.pod(kVersion);
  w.pod(static_cast<int64_t>(params.size()));
  w.pod(fingerprint);
  w.floats(params);
  w.checksum();
  write_file_atomic(path, w.out());
}

void save_model_file(const std::string& path, const ParamLayout& layout,
                     std::span<const float> params, const SafetensorsMetadata& metadata) {
  if (is_safetensors_path(path)) return write_safetensors(path, layout, params, metadata);
  SL_ENFORCE(static_cast<int64_t>(params.size()) == layout.size(),
             "model file: {} parameters given for a model of {}", params.size(), layout.size());
  write_model_file(path, model_layout_fingerprint(layout), params);
}

std::vector<float> read_model_file(const std::string& path, const ParamLayout& layout) {
  if (is_safetensors_path(path)) return read_safetensors(path, layout);
  std::error_code ec;
  SL_ENFORCE_T(IoError, std::filesystem::is_regular_file(path, ec), "cannot read model file {}: {}",
               path, std::filesystem::exists(path, ec) ? "not a regular file" : "no such file");
  std::ifstream in(path, std::ios::binary);
  SL_ENFORCE_T(IoError, in.good(), "cannot read model file {}", path);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  const std::string what = "model file " + path;
  ByteReader r(bytes, what);
  r.verify_checksum();
  const uint8_t* m = r.take(8, "magic");
  SL_ENFORCE_T(FormatError, std::memcmp(m, kMagic, 8) == 0,
               "{}: not a ShardLab model file (bad magic)", what);
  const auto v = r.pod<uint32_t>("version");
  SL_ENFORCE_T(FormatError, v == kVersion,
               "{}: format version {} is not supported (this build reads version {})", what, v,
               kVersion);
  const auto n = r.pod<int64_t>("parameter count");
  SL_ENFORCE(n == layout.size(), "{}: holds {} parameters, this model has {}", what, n,
             layout.size());
  const auto fp = r.pod<uint32_t>("layout fingerprint");
  SL_ENFORCE(fp == model_layout_fingerprint(layout),
             "{}: its parameter names or shapes differ from this model's", what);
  std::vector<float> full(static_cast<size_t>(n));
  r.floats(full, "parameters");
  return full;
}

}  // namespace shardlab
