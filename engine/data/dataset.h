// Dataset: random access to the samples of one split, batched by index lists from a Sampler.
#pragma once

#include <cstdint>
#include <span>

#include "engine/data/batch.h"

namespace shardlab {

class Dataset {
 public:
  virtual ~Dataset() = default;

  // Number of samples; valid indices are [0, size()).
  virtual int64_t size() const = 0;
  // Number of target classes: 10 for Fashion-MNIST, the vocabulary size for characters.
  virtual int64_t num_classes() const = 0;
  // Fills out with the given samples, in order (see batch.h for the layout). out's storage is
  // reused when large enough, so a training loop can gather into one Batch without allocating.
  // Throws InvalidArgument for an index outside [0, size()).
  virtual void gather(std::span<const int64_t> indices, Batch& out) const = 0;
};

}  // namespace shardlab
