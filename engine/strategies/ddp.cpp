// DDP: gradients all-reduced (averaged) per bucket; every rank runs the full update on the whole
// (replicated) parameters and optimizer state. Written on the model's device: the buckets are
// device memory, reduced through DeviceCollectives; the norm, the clipping and the update are the
// device's kernels.
#include <optional>

#include "engine/comm/device_collectives.h"
#include "engine/core/error.h"
#include "engine/strategies/bucketed.h"
#include "engine/strategies/strategies.h"
#include "engine/train/step_math.h"

namespace shardlab::parallel_detail {

namespace {

class Ddp final : public BucketedOptimizer {
 public:
  Ddp(Communicator& comm, const ShardedOptions& options) : BucketedOptimizer(comm, options) {}

 protected:
  void setup() override {
    ShardedOptimizer::setup();
    // Buckets only: nothing is sharded, so no padding (world 1 layout).
    layout_ = ShardLayout::buckets(model_->num_params(), 1, bucket_elements(options_.sharding));
    optimizer_->attach({0, model_->num_params()}, model_->device());
    collectives_.emplace(data_comm(), model_->device());
  }

  WorkHandle launch_bucket(int unit) override {
    const ShardUnit& u = layout_.units()[static_cast<size_t>(unit)];
    return collectives_->all_reduce_async(model_->device_grads().subspan(u.begin, u.size),
                                          ReduceOp::Avg, {CommArray::grads, unit});
  }

  double owned_grad_square_sum() override {
    // Every rank holds the whole reduced gradient; each counts its 1/N so the sum over ranks is
    // the global norm, computed the same way as for the sharded strategies.
    const IndexRange r = chunk_range(model_->num_params(), world_size(), rank());
    return model_->device().squared_norm(model_->device_grads().subspan(r.begin, r.size()));
  }

  void scale_grads(float factor) override {
    model_->device().scale(model_->device_grads().data(), model_->num_params(), factor);
  }

  void update(double lr) override {
    optimizer_->step(model_->device_params(), model_->device_grads(), lr);
  }

  std::span<float> held_params() override { return model_->params(); }

  void load_full_params(std::span<const float> full) override {
    model_->device().copy_from_host(full, model_->device_params());
  }

  void gather_full_params(std::span<float> full) override {
    model_->device().copy_to_host(model_->device_params(), full);
  }

 private:
  std::optional<DeviceCollectives> collectives_;
};

}  // namespace

std::unique_ptr<ShardedOptimizer> make_ddp(Communicator& comm, const ShardedOptions& options) {
  return std::unique_ptr<ShardedOptimizer>(new Ddp(comm, options));
}

}  // namespace shardlab::parallel_detail
