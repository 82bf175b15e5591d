// DDP: gradients all-reduced (averaged) per bucket; every rank runs the full update on the whole
// (replicated) parameters and optimizer state.
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
    optimizer_->attach({0, model_->num_params()});
  }

  WorkHandle launch_bucket(int unit) override {
    const ShardUnit& u = layout_.units()[static_cast<size_t>(unit)];
    return comm_.all_reduce_async(model_->grads().subspan(u.begin, u.size), ReduceOp::Avg,
                                  {CommArray::grads, unit});
  }

  double owned_grad_square_sum() override {
    // Every rank holds the whole reduced gradient; each counts its 1/N so the sum over ranks is
    // the global norm, computed the same way as for the sharded strategies.
    const IndexRange r = chunk_range(model_->num_params(), world_size(), rank());
    return squared_norm(model_->grads().subspan(r.begin, r.size()));
  }

  void scale_grads(float factor) override {
    for (float& g : model_->grads()) g *= factor;
  }

  void update(double lr) override { optimizer_->step(model_->params(), model_->grads(), lr); }

  std::span<float> held_params() override { return model_->params(); }

  void load_full_params(std::span<const float> full) override {
    std::copy(full.begin(), full.end(), model_->params().begin());
  }

  void gather_full_params(std::span<float> full) override {
    std::copy(model_->params().begin(), model_->params().end(), full.begin());
  }
};

}  // namespace

std::unique_ptr<ShardedOptimizer> make_ddp(Communicator& comm, const ShardedOptions& options) {
  return std::unique_ptr<ShardedOptimizer>(new Ddp(comm, options));
}

}  // namespace shardlab::parallel_detail
