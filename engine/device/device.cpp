#include "engine/device/device.h"

#include <fmt/format.h>

#include "engine/core/error.h"

namespace shardlab {

const char* to_string(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::cpu:
      return "cpu";
    case DeviceKind::test:
      return "test";
    case DeviceKind::cuda:
      return "cuda";
  }
  return "?";
}

const std::vector<std::string>& device_kind_names() {
  static const std::vector<std::string> names{"cpu", "cuda", "test"};
  return names;
}

DeviceKind parse_device_kind(std::string_view name) {
  if (name == "cpu") return DeviceKind::cpu;
  if (name == "cuda") return DeviceKind::cuda;
  if (name == "test") return DeviceKind::test;
  SL_THROW(InvalidArgument, "device: unknown device \"{}\" (known: {})", name,
           fmt::join(device_kind_names(), ", "));
}

void Device::check_copy(size_t from, size_t to, const char* what) {
  SL_ENFORCE(from == to, "Device::{}: source holds {} elements but destination {}", what, from, to);
}

CopyCounts Device::copies() const {
  CopyCounts c;
  c.to_host = to_host_.load(std::memory_order_relaxed);
  c.to_host_bytes = to_host_bytes_.load(std::memory_order_relaxed);
  c.from_host = from_host_.load(std::memory_order_relaxed);
  c.from_host_bytes = from_host_bytes_.load(std::memory_order_relaxed);
  return c;
}

void Device::reset_copies() {
  to_host_ = 0, to_host_bytes_ = 0, from_host_ = 0, from_host_bytes_ = 0;
}

namespace {
constexpr size_t kStagingBytes = 256;
}

DevicePtr<double> Device::staging() {
  if (staging_ == nullptr) staging_ = allocate(kStagingBytes, "staging");
  return DevicePtr<double>(static_cast<double*>(staging_));
}

void Device::release_staging() noexcept {
  if (staging_) deallocate(staging_, kStagingBytes);
  staging_ = nullptr;
}

double Device::squared_norm(DeviceSpan<const float> x) {
  const std::lock_guard<std::mutex> hold(staging_mu_);
  const DevicePtr<double> slot = staging();
  sq_norm(x.data(), static_cast<int64_t>(x.size()), slot);
  return read(slot);
}

void Device::count_to_host(size_t bytes) {
  to_host_.fetch_add(1, std::memory_order_relaxed);
  to_host_bytes_.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
}

void Device::count_from_host(size_t bytes) {
  from_host_.fetch_add(1, std::memory_order_relaxed);
  from_host_bytes_.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
}

void host_access_refused(const Device& device) {
  SL_THROW(InternalError, "host access to memory on the {} device (this path runs on cpu only)",
           to_string(device.kind()));
}

}  // namespace shardlab
