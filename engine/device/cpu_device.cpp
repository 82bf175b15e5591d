#include "engine/device/cpu_device.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "engine/core/error.h"

namespace shardlab {

namespace {
constexpr size_t kAlign = 256;
}

void* CpuDevice::allocate(size_t bytes, const char* what) {
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
  if (p == nullptr)
    SL_THROW(DeviceError, "cpu: out of memory allocating {} bytes of {}", bytes, what);
  std::memset(p, 0, rounded);
  return p;
}

void CpuDevice::deallocate(void* p, size_t bytes) noexcept {
  (void)bytes;
  std::free(p);
}

void CpuDevice::copy_to_host_bytes(const void* src, void* dst, size_t bytes) {
  std::memcpy(dst, src, bytes);
  count_to_host(bytes);
}

void CpuDevice::copy_from_host_bytes(const void* src, void* dst, size_t bytes) {
  std::memcpy(dst, src, bytes);
  count_from_host(bytes);
}

void CpuDevice::copy_bytes(const void* src, void* dst, size_t bytes) {
  std::memcpy(dst, src, bytes);
}

}  // namespace shardlab
