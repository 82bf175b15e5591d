// Sampler: which samples go into each batch. Epoch e visits the dataset in an order shuffled by
// Rng::derive(seed, e), so the order depends only on (seed, epoch), never on how far a previous run
// got; it is cut into global batches of batch_size samples, dropping the incomplete last one.
//
// For data parallelism every rank builds the same Sampler with its own rank: each gets the
// contiguous slice [rank * B/world, (rank + 1) * B/world) of every global batch, so the ranks
// together see exactly the batches a single process would, whatever the world size.
#pragma once

#include <cstdint>
#include <vector>

namespace shardlab {

struct SamplerOptions {
  int64_t batch_size = 0;  // global batch size B, over all ranks
  uint64_t seed = 1;
  bool shuffle = true;  // false: every epoch visits 0, 1, 2, ... (for evaluation)
  int64_t rank = 0;
  int64_t world = 1;
};

// Where a Sampler stands, for checkpoints: `index` global batches of epoch `epoch` have been
// handed out. index == batches_per_epoch() means the epoch is finished and the next call to
// next() starts epoch + 1.
struct SamplerState {
  int64_t epoch = 0;
  int64_t index = 0;
  bool operator==(const SamplerState&) const = default;
};

class Sampler {
 public:
  // Throws InvalidArgument (naming the option) unless batch_size >= 1, world >= 1,
  // 0 <= rank < world, batch_size divisible by world, and dataset_size >= batch_size.
  Sampler(int64_t dataset_size, SamplerOptions options);

  // This rank's batch_size / world sample indices of the next global batch, moving on to the next
  // epoch when the current one is exhausted.
  std::vector<int64_t> next();

  // Epoch of the batch most recently returned (0 before the first).
  int64_t epoch() const { return state_.epoch; }
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  // Samples per rank and batch: batch_size / world.
  int64_t local_batch_size() const { return options_.batch_size / options_.world; }
  int64_t dataset_size() const { return dataset_size_; }
  const SamplerOptions& options() const { return options_; }

  SamplerState state() const { return state_; }
  // Resumes from a state() taken earlier (by any rank: all ranks share it). Throws InvalidArgument
  // for a negative epoch or an index outside [0, batches_per_epoch()].
  void set_state(SamplerState state);

 private:
  // Fills order_ with the visiting order of epoch `epoch`.
  void build_order(int64_t epoch);

  int64_t dataset_size_;
  SamplerOptions options_;
  int64_t batches_per_epoch_;
  SamplerState state_;
  int64_t order_epoch_ = -1;  // epoch order_ was built for
  std::vector<int64_t> order_;
};

}  // namespace shardlab
