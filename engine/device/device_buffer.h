// DeviceBuffer<T>: an owned, zero-filled array in a Device's memory, counted by the memory ledger
// as TrackedAllocator counts host buffers (engine/core/memory.h): charged to the ledger bound to
// the allocating thread under its category, credited back when released, whichever thread frees
// it. Parameters, gradients, optimizer state, activations and communication buffers of a device
// job are DeviceBuffers, so the ledger counts the bytes the rank holds on its device, the same
// logical bytes on every device.
//
//   DeviceBuffer<float> w(dev, MemCategory::params, 1024);   // +4096 bytes under params
//   dev.copy_from_host(std::span<const float>(host), w.span());
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/device/device.h"

namespace shardlab {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device& device, MemCategory category, int64_t n)
      : device_(&device), category_(category) {
    grow(static_cast<size_t>(n));
  }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      device_ = o.device_, category_ = o.category_, ledger_ = o.ledger_;
      data_ = o.data_, size_ = o.size_, capacity_ = o.capacity_;
      o.data_ = nullptr, o.size_ = o.capacity_ = 0, o.ledger_ = nullptr;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  Device* device() const { return device_; }
  MemCategory category() const { return category_; }
  int64_t size() const { return static_cast<int64_t>(size_); }
  bool empty() const { return size_ == 0; }
  DevicePtr<T> data() { return DevicePtr<T>(data_); }
  DevicePtr<const T> data() const { return DevicePtr<const T>(data_); }
  DeviceSpan<T> span() { return {data(), size_}; }
  DeviceSpan<const T> span() const { return {data(), size_}; }

  // Sets the size to n. Storage is reallocated (exactly n, zero-filled) only when it is too small,
  // so steady-state steps do not allocate; contents are unspecified after a growth.
  void resize(int64_t n) {
    const auto want = static_cast<size_t>(n);
    if (want > capacity_) {
      Device* d = device_;
      const MemCategory c = category_;
      release();
      device_ = d, category_ = c;
      grow(want);
    }
    size_ = want;
  }
  // Gives the storage back now.
  void reset() {
    Device* d = device_;
    const MemCategory c = category_;
    release();
    device_ = d, category_ = c;
  }
  // For an empty buffer made with the default constructor: where later resizes allocate.
  void bind(Device& device, MemCategory category) {
    reset();
    device_ = &device, category_ = category;
  }

 private:
  void grow(size_t n) {
    if (n == 0) return;
    SL_ENFORCE_T(InternalError, device_ != nullptr, "DeviceBuffer: no device to allocate on");
    data_ = static_cast<T*>(device_->allocate(n * sizeof(T), to_string(category_)));
    size_ = capacity_ = n;
    ledger_ = current_ledger();
    if (ledger_) ledger_->charge(category_, static_cast<int64_t>(n * sizeof(T)));
  }
  void release() noexcept {
    if (data_) {
      device_->deallocate(data_, capacity_ * sizeof(T));
      if (ledger_) ledger_->release(category_, static_cast<int64_t>(capacity_ * sizeof(T)));
    }
    data_ = nullptr, size_ = capacity_ = 0, ledger_ = nullptr;
  }

  Device* device_ = nullptr;
  MemCategory category_ = MemCategory::activations;
  MemoryLedger* ledger_ = nullptr;
  T* data_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
};

}  // namespace shardlab
