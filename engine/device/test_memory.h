// TestMemory: the test device's memory. One shared-memory file (memfd) mapped twice: the
// addresses the device hands out are in a mapping with no access at all, so host code that reads
// or writes device memory without a copy faults at that line; the device's own kernels and copies
// reach the same bytes through a second, read-write mapping (kernel_address()). Freed ranges are
// punched out of the file, which gives their pages back and makes them read as zeros, so a new
// allocation is zero-filled without a pass over it.
//
// Allocation is first-fit over 256-byte units with coalescing of free neighbours; the file is
// sparse, so the reserved size costs address space, not memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace shardlab {

class TestMemory {
 public:
  // Reserves `bytes` of address space (twice: the two mappings). Throws DeviceError when the
  // file or a mapping cannot be made.
  explicit TestMemory(size_t bytes);
  ~TestMemory();
  TestMemory(const TestMemory&) = delete;
  TestMemory& operator=(const TestMemory&) = delete;

  // A device address of `bytes` bytes (at least 1 unit); DeviceError naming `what` when the
  // reserved space has no free range that large.
  void* allocate(size_t bytes, const char* what);
  // Returns [p, p + bytes) from allocate() to the free ranges. The caller punches it (zero()) first
  // when it may still be read by queued work: see TestDevice::deallocate.
  void release(void* p, size_t bytes) noexcept;
  // Gives the pages of [p, p + bytes) back to the system; the range then reads as zeros.
  void zero(void* p, size_t bytes) noexcept;

  // The address the device's kernels use for device address p (null stays null). Throws
  // DeviceError when p is not in this device's memory (a host pointer, another device's).
  template <class T>
  T* kernel_address(T* p) const {
    if (p == nullptr) return nullptr;
    return reinterpret_cast<T*>(kernel_byte(reinterpret_cast<uintptr_t>(p)));
  }
  bool contains(const void* p) const;
  size_t bytes_in_use() const;

 private:
  uintptr_t kernel_byte(uintptr_t device_address) const;

  int fd_ = -1;
  size_t size_ = 0;
  char* device_base_ = nullptr;  // PROT_NONE
  char* kernel_base_ = nullptr;  // PROT_READ | PROT_WRITE
  mutable std::mutex mu_;
  std::map<size_t, size_t> free_;  // offset -> length, non-adjacent
  size_t in_use_ = 0;
};

}  // namespace shardlab
