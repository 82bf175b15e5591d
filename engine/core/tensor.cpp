#include "engine/core/tensor.h"

#include <algorithm>

#include "engine/core/error.h"

namespace shardlab {

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    SL_ENFORCE(d >= 0, "negative dimension in shape {}", to_string(shape));
    n *= d;
  }
  return n;
}

std::string to_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Tensor::Tensor(Shape shape)
    : shape_(std::move(shape)), data_(static_cast<size_t>(numel_of(shape_))) {}

Tensor::Tensor(Shape shape, std::vector<float> values)
    : shape_(std::move(shape)), data_(values.begin(), values.end()) {
  SL_ENFORCE(numel_of(shape_) == static_cast<int64_t>(data_.size()),
             "tensor of shape {} needs {} values, got {}", to_string(shape_), numel_of(shape_),
             data_.size());
}

int64_t Tensor::dim(int i) const {
  const int r = rank();
  if (i < 0) i += r;
  SL_ENFORCE(i >= 0 && i < r, "dimension {} out of range for shape {}", i, to_string(shape_));
  return shape_[static_cast<size_t>(i)];
}

void Tensor::resize(const Shape& shape) {
  shape_ = shape;
  const auto n = static_cast<size_t>(numel_of(shape_));
  if (n > data_.capacity()) data_.reserve(n);  // exactly n, not the vector's growth policy
  data_.resize(n);
}

void Tensor::reshape(const Shape& shape) {
  SL_ENFORCE(numel_of(shape) == numel(), "cannot reshape {} to {}", to_string(shape_),
             to_string(shape));
  shape_ = shape;
}

void Tensor::zero() {
  std::fill(data_.begin(), data_.end(), 0.0f);
}
void Tensor::fill(float v) {
  std::fill(data_.begin(), data_.end(), v);
}

}  // namespace shardlab
