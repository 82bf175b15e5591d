// DevicePtr<T> and DeviceSpan<T>: addresses in a device's memory, as their own types.
//
// Device memory is not host memory (a GPU's, or the test device's, whose addresses the host may
// not touch: engine/device/test_device.h), so a view of it is not a std::span: it has no operator*,
// no operator[] and no iterators, and host code that tries to read or write through one does not
// compile. Data crosses between host and device only through Device::copy_to_host /
// copy_from_host (counted), and is worked on only by the device's kernels (Device's kernel table).
//
// raw() gives the address itself, for the code that hands it to the device: a device's kernel
// table and the communicators that move device memory. Nothing else calls it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace shardlab {

template <class T>
class DevicePtr {
 public:
  DevicePtr() = default;
  explicit DevicePtr(T* raw) : p_(raw) {}
  // A pointer to T converts to a pointer to const T.
  template <class U, class = std::enable_if_t<std::is_same_v<const U, T> && !std::is_same_v<U, T>>>
  DevicePtr(DevicePtr<U> o) : p_(o.raw()) {}  // NOLINT: implicit, as T* -> const T*

  T* raw() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }
  DevicePtr operator+(int64_t n) const { return DevicePtr(p_ + n); }
  bool operator==(const DevicePtr&) const = default;

 private:
  T* p_ = nullptr;
};

template <class T>
class DeviceSpan {
 public:
  DeviceSpan() = default;
  DeviceSpan(DevicePtr<T> data, size_t size) : data_(data), size_(size) {}
  template <class U, class = std::enable_if_t<std::is_same_v<const U, T> && !std::is_same_v<U, T>>>
  DeviceSpan(DeviceSpan<U> o) : data_(o.data()), size_(o.size()) {}  // NOLINT: as span<const T>

  DevicePtr<T> data() const { return data_; }
  size_t size() const { return size_; }
  size_t size_bytes() const { return size_ * sizeof(T); }
  bool empty() const { return size_ == 0; }
  // Elements [offset, offset + count) (count -1: to the end). Out of range is a caller's bug:
  // checked by the callers that take sizes from outside (Device's copies check their sizes).
  DeviceSpan subspan(int64_t offset, int64_t count = -1) const {
    const auto off = static_cast<size_t>(offset);
    return {data_ + offset, count < 0 ? size_ - off : static_cast<size_t>(count)};
  }
  DeviceSpan first(int64_t count) const { return {data_, static_cast<size_t>(count)}; }

 private:
  DevicePtr<T> data_;
  size_t size_ = 0;
};

}  // namespace shardlab
