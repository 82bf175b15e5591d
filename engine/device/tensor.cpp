#include "engine/device/tensor.h"

#include <cstring>

#include "engine/core/error.h"

namespace shardlab {

Tensor::Tensor() { data_.bind(host_device(), MemCategory::activations); }

Tensor::Tensor(Shape shape, Device& device)
    : shape_(std::move(shape)), data_(device, MemCategory::activations, numel_of(shape_)) {}

Tensor::Tensor(Shape shape, std::vector<float> values)
    : shape_(std::move(shape)),
      data_(host_device(), MemCategory::activations, static_cast<int64_t>(values.size())) {
  SL_ENFORCE(numel_of(shape_) == static_cast<int64_t>(values.size()),
             "tensor of shape {} needs {} values, got {}", to_string(shape_), numel_of(shape_),
             values.size());
  if (!values.empty()) std::memcpy(data(), values.data(), values.size() * sizeof(float));
}

Tensor::Tensor(const Tensor& other) : shape_(other.shape_) {
  data_.bind(other.device(), MemCategory::activations);
  data_.resize(other.numel());
  device().copy(other.dspan(), dspan());
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this == &other) return *this;
  resize(other.shape_, other.device());
  device().copy(other.dspan(), dspan());
  return *this;
}

int64_t Tensor::dim(int i) const {
  const int r = rank();
  if (i < 0) i += r;
  SL_ENFORCE(i >= 0 && i < r, "dimension {} out of range for shape {}", i, to_string(shape_));
  return shape_[static_cast<size_t>(i)];
}

std::vector<float> Tensor::to_host() const {
  std::vector<float> h(static_cast<size_t>(numel()));
  device().copy_to_host(dspan(), std::span<float>(h));
  return h;
}

void Tensor::from_host(const Shape& shape, std::span<const float> values) {
  resize(shape);
  device().copy_from_host(values, dspan());
}

float* Tensor::data() {
  SL_ENFORCE_T(InternalError, device().kind() == DeviceKind::cpu,
               "host access to a tensor on the {} device (copy it with to_host())",
               to_string(device().kind()));
  return data_.data().raw();
}

const float* Tensor::data() const { return const_cast<Tensor*>(this)->data(); }

void Tensor::resize(const Shape& shape) {
  shape_ = shape;
  data_.resize(numel_of(shape_));
}

void Tensor::resize(const Shape& shape, Device& device) {
  if (&device != data_.device()) data_.bind(device, MemCategory::activations);
  resize(shape);
}

void Tensor::reshape(const Shape& shape) {
  SL_ENFORCE(numel_of(shape) == numel(), "cannot reshape {} to {}", to_string(shape_),
             to_string(shape));
  shape_ = shape;
}

void Tensor::zero() { fill(0.0f); }

void Tensor::fill(float v) {
  if (numel() > 0) device().fill(dev(), numel(), v);
}

}  // namespace shardlab
