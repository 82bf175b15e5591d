// Tensor: a row-major float32 array with a shape, in one Device's memory (the host device unless
// given another), and TensorView, a window on host floats owned by someone else.
//
// Layers and models work on tensors only through their device: dev() is a DevicePtr for the
// device's kernels (engine/device/device.h), and to_host() / from_host() are counted copies. The
// host accessors (data(), operator[], span(), view()) are for tensors on the host (cpu) device
// only and throw InternalError on any other ("host access to a tensor on the test device"): the
// code that still reads tensors on the host (data loading, tensor and pipeline parallelism) runs
// on cpu until it moves to the device too.
//
// Storage is a DeviceBuffer counted as activations by the ledger bound to the allocating thread
// (engine/core/memory.h), sized exactly, so the ledger sees what is held.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/core/shape.h"
#include "engine/device/device.h"
#include "engine/device/device_buffer.h"

namespace shardlab {

// A non-owning window on contiguous host floats with a shape.
struct TensorView {
  float* data = nullptr;
  Shape shape;

  int64_t numel() const { return numel_of(shape); }
  std::span<float> span() const { return {data, static_cast<size_t>(numel())}; }
};

class Tensor {
 public:
  // Empty, on the host device.
  Tensor();
  // Zero-filled, of the given shape, on `device`.
  explicit Tensor(Shape shape, Device& device = host_device());
  // On the host device; values.size() must equal numel(shape).
  Tensor(Shape shape, std::vector<float> values);
  // A copy on the same device (a device-to-device copy).
  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&& other) noexcept = default;
  Tensor& operator=(Tensor&& other) noexcept = default;

  Device& device() const { return *data_.device(); }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  // Size of dimension i; negative i counts from the back (-1 is the last dimension).
  int64_t dim(int i) const;
  int64_t numel() const { return data_.size(); }
  bool empty() const { return data_.empty(); }

  // Device memory, for the device's kernels and copies.
  DevicePtr<float> dev() { return data_.data(); }
  DevicePtr<const float> dev() const { return data_.data(); }
  DeviceSpan<float> dspan() { return data_.span(); }
  DeviceSpan<const float> dspan() const { return data_.span(); }
  // The elements on the host (a counted copy from the tensor's device).
  std::vector<float> to_host() const;
  // Sets the shape and copies `values` (numel(shape) of them) onto the tensor's device.
  void from_host(const Shape& shape, std::span<const float> values);

  // Host access: tensors on the host device only (InternalError otherwise).
  float* data();
  const float* data() const;
  float& operator[](int64_t i) { return data()[i]; }
  float operator[](int64_t i) const { return data()[i]; }
  std::span<float> span() { return {data(), static_cast<size_t>(numel())}; }
  std::span<const float> span() const { return {data(), static_cast<size_t>(numel())}; }
  TensorView view() { return {data(), shape_}; }

  // Change the shape; storage is reused when it is large enough (it never shrinks), otherwise
  // grown to exactly the new size. Contents are unspecified.
  void resize(const Shape& shape);
  // The same, on `device`: a tensor on another device gives its storage back and is allocated
  // anew there (what a layer does with the output tensor its caller hands it).
  void resize(const Shape& shape, Device& device);
  // Change the shape keeping the element count (and the data).
  void reshape(const Shape& shape);
  void zero();
  void fill(float v);

 private:
  Shape shape_;
  DeviceBuffer<float> data_;
};

}  // namespace shardlab
