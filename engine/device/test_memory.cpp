#include "engine/device/test_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/core/error.h"

namespace shardlab {

namespace {
constexpr size_t kUnit = 256;

size_t round_up(size_t n) {
  return (n == 0 ? 1 : (n + kUnit - 1) / kUnit) * kUnit;
}
}  // namespace

TestMemory::TestMemory(size_t bytes) : size_(round_up(bytes)) {
  fd_ = memfd_create("shardlab-test-device", MFD_CLOEXEC);
  if (fd_ < 0) SL_THROW(DeviceError, "test device: memfd_create failed: {}", std::strerror(errno));
  if (ftruncate(fd_, static_cast<off_t>(size_)) != 0) {
    const int err = errno;
    close(fd_);
    SL_THROW(DeviceError, "test device: reserving {} bytes failed: {}", size_, std::strerror(err));
  }
  void* dev = mmap(nullptr, size_, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd_, 0);
  void* ker = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd_, 0);
  if (dev == MAP_FAILED || ker == MAP_FAILED) {
    const int err = errno;
    if (dev != MAP_FAILED) munmap(dev, size_);
    if (ker != MAP_FAILED) munmap(ker, size_);
    close(fd_);
    SL_THROW(DeviceError, "test device: mapping {} bytes failed: {}", size_, std::strerror(err));
  }
  device_base_ = static_cast<char*>(dev);
  kernel_base_ = static_cast<char*>(ker);
  free_[0] = size_;
}

TestMemory::~TestMemory() {
  munmap(device_base_, size_);
  munmap(kernel_base_, size_);
  close(fd_);
}

void* TestMemory::allocate(size_t bytes, const char* what) {
  const size_t want = round_up(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < want) continue;
    const size_t off = it->first, len = it->second;
    free_.erase(it);
    if (len > want) free_[off + want] = len - want;
    in_use_ += want;
    return device_base_ + off;
  }
  SL_THROW(DeviceError,
           "test device: out of memory allocating {} bytes of {} ({} of {} bytes in use)", bytes,
           what, in_use_, size_);
}

void TestMemory::release(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  const size_t len = round_up(bytes);
  size_t off = static_cast<size_t>(static_cast<char*>(p) - device_base_);
  size_t end = off + len;
  std::lock_guard<std::mutex> lock(mu_);
  in_use_ -= len;
  auto next = free_.lower_bound(off);
  if (next != free_.end() && next->first == end) {  // merge with the range after
    end += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {  // merge with the range before
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      off = prev->first;
      free_.erase(prev);
    }
  }
  free_[off] = end - off;
}

void TestMemory::zero(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  const auto off = static_cast<off_t>(static_cast<char*>(p) - device_base_);
  // Punching a hole zeroes partial pages too; tmpfs (memfd) supports it. Should it ever fail,
  // zero the bytes through the kernel mapping instead.
  if (fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off,
                static_cast<off_t>(round_up(bytes))) != 0)
    std::memset(kernel_base_ + off, 0, round_up(bytes));
}

bool TestMemory::contains(const void* p) const {
  const auto* c = static_cast<const char*>(p);
  return c >= device_base_ && c < device_base_ + size_;
}

size_t TestMemory::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

uintptr_t TestMemory::kernel_byte(uintptr_t device_address) const {
  const auto base = reinterpret_cast<uintptr_t>(device_base_);
  if (device_address < base || device_address >= base + size_)
    SL_THROW(DeviceError,
             "test device: address {:#x} is not in this device's memory (a host pointer, or "
             "another device's, passed where device memory was expected)",
             device_address);
  return reinterpret_cast<uintptr_t>(kernel_base_) + (device_address - base);
}

}  // namespace shardlab
