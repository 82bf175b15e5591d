// Tensor: contiguous row-major float32 storage with a shape, and TensorView, the same over memory
// owned by someone else (a slice of a model's flat parameter buffer, for instance).
//
// A Tensor's storage is counted as activations by the memory ledger bound to the thread that
// created it (engine/core/memory.h); it is sized exactly, so the ledger sees what is held.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "engine/core/memory.h"

namespace shardlab {

using Shape = std::vector<int64_t>;

int64_t numel_of(const Shape& shape);
std::string to_string(const Shape& shape);

// A non-owning window on contiguous floats with a shape.
struct TensorView {
  float* data = nullptr;
  Shape shape;

  int64_t numel() const { return numel_of(shape); }
  std::span<float> span() const { return {data, static_cast<size_t>(numel())}; }
};

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled tensor of the given shape.
  explicit Tensor(Shape shape);
  Tensor(Shape shape, std::vector<float> values);  // values.size() must equal numel(shape)

  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  // Size of dimension i; negative i counts from the back (-1 is the last dimension).
  int64_t dim(int i) const;
  int64_t numel() const { return static_cast<int64_t>(data_.size()); }
  bool empty() const { return data_.empty(); }

  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  float& operator[](int64_t i) { return data_[static_cast<size_t>(i)]; }
  float operator[](int64_t i) const { return data_[static_cast<size_t>(i)]; }
  std::span<float> span() { return data_; }
  std::span<const float> span() const { return data_; }
  TensorView view() { return {data_.data(), shape_}; }

  // Change the shape; storage is reused when it is large enough (it never shrinks), otherwise
  // grown to exactly the new size. Contents are unspecified.
  void resize(const Shape& shape);
  // Change the shape keeping the element count (and the data).
  void reshape(const Shape& shape);
  void zero();
  void fill(float v);

 private:
  Shape shape_;
  std::vector<float, TrackedAllocator<float>> data_;
};

}  // namespace shardlab
