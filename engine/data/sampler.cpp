#include "engine/data/sampler.h"

#include <numeric>

#include "engine/core/error.h"
#include "engine/core/rng.h"

namespace shardlab {

Sampler::Sampler(int64_t dataset_size, SamplerOptions options)
    : dataset_size_(dataset_size), options_(options) {
  const int64_t b = options_.batch_size;
  SL_ENFORCE(b >= 1, "batch_size: must be >= 1, got {}", b);
  SL_ENFORCE(options_.world >= 1, "world: must be >= 1, got {}", options_.world);
  SL_ENFORCE(options_.rank >= 0 && options_.rank < options_.world,
             "rank: must be in [0, {}), got {}", options_.world, options_.rank);
  SL_ENFORCE(b % options_.world == 0,
             "batch_size: {} is not divisible by the {} data-parallel ranks", b, options_.world);
  SL_ENFORCE(dataset_size_ >= b,
             "batch_size: {} is larger than the dataset of {} samples (the last incomplete "
             "batch is dropped, so no batch would remain)",
             b, dataset_size_);
  batches_per_epoch_ = dataset_size_ / b;
}

void Sampler::build_order(int64_t epoch) {
  order_.resize(static_cast<size_t>(dataset_size_));
  std::iota(order_.begin(), order_.end(), int64_t{0});
  if (options_.shuffle) {
    Rng rng = Rng::derive(options_.seed, static_cast<uint64_t>(epoch));
    rng.shuffle(order_);
  }
  order_epoch_ = epoch;
}

std::vector<int64_t> Sampler::next() {
  if (state_.index >= batches_per_epoch_) state_ = {state_.epoch + 1, 0};
  if (order_epoch_ != state_.epoch) build_order(state_.epoch);
  const int64_t local = local_batch_size();
  const int64_t begin = state_.index * options_.batch_size + options_.rank * local;
  ++state_.index;
  return {order_.begin() + begin, order_.begin() + begin + local};
}

void Sampler::set_state(SamplerState state) {
  SL_ENFORCE(state.epoch >= 0, "sampler state: negative epoch {}", state.epoch);
  SL_ENFORCE(state.index >= 0 && state.index <= batches_per_epoch_,
             "sampler state: batch index {} outside [0, {}] (checkpoint from another dataset or "
             "batch size?)",
             state.index, batches_per_epoch_);
  state_ = state;
}

}  // namespace shardlab
