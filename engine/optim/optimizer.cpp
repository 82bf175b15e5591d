// The shared half of every optimizer: range bookkeeping, the step count and the binary state
// format. The optimizers themselves, their validation and the factory are in registry.cpp.
//
// State format, version 1 (all integers and floats little-endian):
//   magic      8 bytes  "SLOPTIM\0"
//   version    u32
//   name       str      (u32 length, then that many bytes)
//   hyper      u32 count, then count x (str key, f64 value): every OptimizerConfig number, so a
//                         checkpoint describes itself
//   range      i64 begin, i64 end
//   steps      i64
//   state      u32 count, then count x (str name, i64 length, length x f32)
//   checksum   u32      CRC-32 (zlib) of every byte before it
// The checksum comes last so that one pass writes the file; a reader checks it before trusting
// any length field in between.
#include "engine/optim/optimizer.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>

#include "engine/core/bytes.h"
#include "engine/core/error.h"
#include "engine/optim/registry.h"

namespace shardlab {

namespace {

constexpr char kMagic[8] = {'S', 'L', 'O', 'P', 'T', 'I', 'M', '\0'};
constexpr uint32_t kVersion = 1;

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string range_str(IndexRange r) {
  return fmt::format("[{}, {})", r.begin, r.end);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Optimizer

Device& Optimizer::device() const {
  SL_ENFORCE_T(InternalError, device_ != nullptr, "optimizer {}: used before attach()", name());
  return *device_;
}

void Optimizer::attach(IndexRange range, Device& device) {
  SL_ENFORCE(range.begin >= 0 && range.end >= range.begin,
             "optimizer.attach: invalid range {} (needs 0 <= begin <= end)", range_str(range));
  device_ = &device;
  allocate_state(range.size());
  range_ = range;
  steps_ = 0;
}

void Optimizer::step(std::span<float> params, std::span<const float> grads, double lr) {
  if (device_ && device_->kind() != DeviceKind::cpu) host_access_refused(*device_);
  step(DeviceSpan<float>(DevicePtr<float>(params.data()), params.size()),
       DeviceSpan<const float>(DevicePtr<const float>(grads.data()), grads.size()), lr);
}

void Optimizer::update_on_device(DeviceSpan<float> params, DeviceSpan<const float> grads,
                                 double lr) {
  update({host_address(device(), params.data()), params.size()},
         {host_address(device(), grads.data()), grads.size()}, lr);
}

void Optimizer::update(std::span<float> params, std::span<const float> grads, double lr) {
  (void)params, (void)grads, (void)lr;
  SL_THROW(InternalError,
           "optimizer {}: no update of its own (neither update_on_device nor update)", name());
}

void Optimizer::step(DeviceSpan<float> params, DeviceSpan<const float> grads, double lr) {
  const auto n = static_cast<size_t>(range_.size());
  SL_ENFORCE(params.size() == n,
             "optimizer.step: params has {} elements but the attached range {} has {}",
             params.size(), range_str(range_), n);
  SL_ENFORCE(grads.size() == n,
             "optimizer.step: grads has {} elements but the attached range {} has {}", grads.size(),
             range_str(range_), n);
  SL_ENFORCE(std::isfinite(lr) && lr >= 0.0, "optimizer.step: lr must be finite and >= 0, got {}",
             lr);
  // The kernels take restrict pointers: overlapping params and grads would be undefined.
  const std::less<const float*> lt;
  const float* p = params.data().raw();
  const float* g = grads.data().raw();
  SL_ENFORCE(n == 0 || !lt(p, g + n) || !lt(g, p + n), "optimizer.step: params and grads overlap");
  ++steps_;
  update_on_device(params, grads, lr);
}

std::vector<std::string> Optimizer::state_names() {
  std::vector<std::string> names;
  for (const auto& [name, s] : state()) names.push_back(name);
  return names;
}

std::vector<std::pair<std::string, DeviceSpan<float>>> Optimizer::device_state() {
  std::vector<std::pair<std::string, DeviceSpan<float>>> out;
  for (const auto& [name, s] : state())
    out.emplace_back(name, DeviceSpan<float>(DevicePtr<float>(s.data()), s.size()));
  return out;
}

int64_t Optimizer::state_bytes() {
  int64_t bytes = 0;
  for (const auto& [name, s] : state()) bytes += static_cast<int64_t>(s.size() * sizeof(float));
  return bytes;
}

std::vector<uint8_t> Optimizer::serialize() {
  const auto arrays = state();
  const auto& hyper = hyper_parameters();
  size_t size = sizeof kMagic + 4 + 4 + name().size() + 4 + 2 * 8 + 8 + 4 + 4;
  for (const HyperParameter& h : hyper) size += 4 + std::strlen(h.name) + 8;
  for (const auto& [k, s] : arrays) size += 4 + k.size() + 8 + s.size() * sizeof(float);

  ByteWriter w(size);
  w.bytes(kMagic, sizeof kMagic);
  w.pod(kVersion);
  w.str(name());
  w.pod(static_cast<uint32_t>(hyper.size()));
  for (const HyperParameter& h : hyper) {
    w.str(h.name);
    w.pod(h.get(config_));
  }
  w.pod(range_.begin);
  w.pod(range_.end);
  w.pod(steps_);
  w.pod(static_cast<uint32_t>(arrays.size()));
  for (const auto& [k, s] : arrays) {
    w.str(k);
    w.floats(s);
  }
  w.checksum();
  return std::move(w.out());
}

void Optimizer::deserialize(std::span<const uint8_t> bytes) {
  // Phase 1: everything is read and checked against this optimizer; nothing is written.
  SL_ENFORCE_T(FormatError, bytes.size() >= sizeof kMagic + 4 + 4,
               "optimizer state: {} bytes is too short to be an optimizer state", bytes.size());
  SL_ENFORCE_T(FormatError, std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0,
               "optimizer state: bad magic, not a ShardLab optimizer state");
  ByteReader r(bytes.first(bytes.size() - 4), "optimizer state");
  r.take(sizeof kMagic, "magic");
  const auto version = r.pod<uint32_t>("version");
  SL_ENFORCE_T(FormatError, version == kVersion,
               "optimizer state: unsupported format version {} (this build reads {})", version,
               kVersion);
  const TrailingChecksum crc = trailing_checksum(bytes);
  SL_ENFORCE_T(FormatError, crc.ok(),
               "optimizer state: checksum mismatch (stored {:08x}, computed {:08x}): the bytes are "
               "corrupt or truncated",
               crc.stored, crc.computed);

  const std::string stored_name = r.str("optimizer name");
  const auto n_hyper = r.pod<uint32_t>("hyper-parameter count");
  for (uint32_t i = 0; i < n_hyper; ++i) {
    // Recorded so a checkpoint describes itself; on load the current configuration wins (a
    // resumed job may legitimately change lr or weight decay), so they are only read past.
    r.str("hyper-parameter name");
    r.pod<double>("hyper-parameter value");
  }
  IndexRange stored_range;
  stored_range.begin = r.pod<int64_t>("range begin");
  stored_range.end = r.pod<int64_t>("range end");
  const auto stored_steps = r.pod<int64_t>("step count");
  SL_ENFORCE_T(FormatError, stored_steps >= 0, "optimizer state: negative step count {}",
               stored_steps);

  struct Array {
    std::string name;
    int64_t length;
    const uint8_t* data;
  };
  std::vector<Array> stored;
  const auto n_arrays = r.pod<uint32_t>("state array count");
  for (uint32_t i = 0; i < n_arrays; ++i) {
    Array a;
    a.name = r.str("state array name");
    a.length = r.pod<int64_t>("state array length");
    SL_ENFORCE_T(FormatError, a.length >= 0 && static_cast<uint64_t>(a.length) <= r.left() / 4,
                 "optimizer state: state array '{}' claims {} elements, only {} bytes left", a.name,
                 a.length, r.left());
    a.data = r.take(static_cast<size_t>(a.length) * sizeof(float), "state array data");
    stored.push_back(std::move(a));
  }
  SL_ENFORCE_T(FormatError, r.left() == 0,
               "optimizer state: {} unexpected bytes after the last state array", r.left());

  SL_ENFORCE(stored_name == name(),
             "optimizer state: written by optimizer '{}', cannot load into '{}'", stored_name,
             name());
  SL_ENFORCE(stored_range.begin == range_.begin && stored_range.end == range_.end,
             "optimizer state: written for range {}, this optimizer is attached to {}",
             range_str(stored_range), range_str(range_));
  const auto arrays = state();
  std::vector<std::string> have, want;
  for (const auto& a : stored) have.push_back(a.name);
  for (const auto& [k, s] : arrays) want.push_back(k);
  SL_ENFORCE(have == want,
             "optimizer state: has state arrays [{}], this {} optimizer keeps [{}] (different "
             "momentum setting?)",
             join(have), name(), join(want));
  for (size_t i = 0; i < arrays.size(); ++i)
    SL_ENFORCE(static_cast<size_t>(stored[i].length) == arrays[i].second.size(),
               "optimizer state: state array '{}' has {} elements, expected {}", stored[i].name,
               stored[i].length, arrays[i].second.size());

  // Phase 2: commit. Nothing below can throw.
  for (size_t i = 0; i < arrays.size(); ++i)
    if (!arrays[i].second.empty())
      std::memcpy(arrays[i].second.data(), stored[i].data, arrays[i].second.size() * sizeof(float));
  steps_ = stored_steps;
}

void Optimizer::restore_steps(int64_t steps) {
  SL_ENFORCE(steps >= 0, "optimizer step count must be >= 0, got {}", steps);
  steps_ = steps;
}

}  // namespace shardlab
