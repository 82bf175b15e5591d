// ZeRO-1 and ZeRO-2 (Rajbhandari et al. 2019) over flat, padded parameters cut into buckets;
// rank r owns chunk r of every bucket (its shard, Psi'/N elements).
//
//   ZeRO-1: gradients all-reduced per bucket (full gradients kept); each rank updates its shard
//           with optimizer state for the shard only; parameters all-gathered per bucket.
//   ZeRO-2: gradients reduce-scattered per bucket straight into a persistent gradient shard,
//           and the full gradient buffer is freed until the next step's backward; shard update;
//           parameters all-gathered per bucket.
// The shard update runs on a packed copy of the rank's chunks (a communication buffer that
// lives only during the update), which is also the all-gather's input.
#include "engine/core/error.h"
#include "engine/strategies/bucketed.h"
#include "engine/strategies/strategies.h"
#include "engine/train/step_math.h"

namespace shardlab::parallel_detail {

namespace {

class Zero final : public BucketedOptimizer {
 public:
  Zero(Communicator& comm, const ShardedOptions& options, int stage)
      : BucketedOptimizer(comm, options), stage_(stage) {}
  ~Zero() override { drop_pending(); }

 protected:
  void setup() override {
    // Padded from the start (to a multiple of N, as the layout pads), so set-up never holds two
    // copies of the parameters.
    build_model_and_optimizer(ModelStorage::owned, world_size());
    layout_ = ShardLayout::buckets(model_->num_params(), world_size(),
                                   bucket_elements(options_.sharding));
    SL_ENFORCE_T(InternalError,
                 static_cast<int64_t>(model_->padded_params().size()) == layout_.padded_total(),
                 "ZeRO: model padding {} differs from the shard layout's {}",
                 model_->padded_params().size(), layout_.padded_total());
    optimizer_->attach({0, layout_.shard_size()});
    if (stage_ == 2) {
      grad_shard_ = make_buffer(MemCategory::grads, layout_.shard_size());
      model_->release_grads();
    }
  }

  WorkHandle launch_bucket(int unit) override {
    const ShardUnit& u = layout_.units()[static_cast<size_t>(unit)];
    std::span<float> grads = model_->padded_grads().subspan(u.padded_begin, u.padded);
    const CommSubject subject{CommArray::grads, unit};
    if (stage_ == 1) return comm_.all_reduce_async(grads, ReduceOp::Avg, subject);
    return comm_.reduce_scatter_async(
        grads, std::span<float>(grad_shard_).subspan(u.shard_offset, u.chunk), ReduceOp::Avg,
        subject);
  }

  void buckets_reduced() override {
    if (stage_ == 2) model_->release_grads();
  }

  double owned_grad_square_sum() override {
    if (stage_ == 2) return squared_norm(grad_shard_);
    double s = 0;
    for_each_owned_grad_chunk([&](std::span<float> c) { s += squared_norm(c); });
    return s;
  }

  void scale_grads(float factor) override {
    if (stage_ == 2) {
      for (float& g : grad_shard_) g *= factor;
      return;
    }
    for_each_owned_grad_chunk([&](std::span<float> c) {
      for (float& g : c) g *= factor;
    });
  }

  void update(double lr) override {
    const int64_t n = layout_.shard_size();
    Buffer params = make_buffer(MemCategory::comm, n);
    pack_shard(model_->padded_params(), params);
    if (stage_ == 1) {
      Buffer grads = make_buffer(MemCategory::comm, n);
      pack_shard(model_->padded_grads(), grads);
      optimizer_->step(params, grads, lr);
    } else {
      optimizer_->step(params, grad_shard_, lr);
    }
    std::vector<WorkHandle> gathers;
    for (int32_t i = 0; i < static_cast<int32_t>(layout_.units().size()); ++i) {
      const ShardUnit& u = layout_.units()[static_cast<size_t>(i)];
      gathers.push_back(comm_.all_gather_async(
          std::span<const float>(params).subspan(u.shard_offset, u.chunk),
          model_->padded_params().subspan(u.padded_begin, u.padded), {CommArray::params, i}));
    }
    wait_all(gathers);
  }

  std::span<float> held_params() override { return model_->params(); }

  void load_full_params(std::span<const float> full) override {
    std::copy(full.begin(), full.end(), model_->params().begin());
  }

  void gather_full_params(std::span<float> full) override {
    std::copy(model_->params().begin(), model_->params().end(), full.begin());
  }

 private:
  template <class F>
  void for_each_owned_grad_chunk(F&& f) {
    std::span<float> grads = model_->padded_grads();
    for (int i = 0; i < static_cast<int>(layout_.units().size()); ++i) {
      const ShardUnit& u = layout_.units()[static_cast<size_t>(i)];
      f(grads.subspan(u.padded_begin + layout_.chunk(i, rank()).begin, u.chunk));
    }
  }

  int stage_;
  Buffer grad_shard_;  // ZeRO-2: this rank's reduced gradients
};

}  // namespace

std::unique_ptr<ShardedOptimizer> make_zero(Communicator& comm, const ShardedOptions& options,
                                            int stage) {
  SL_ENFORCE(stage == 1 || stage == 2, "ZeRO stage must be 1 or 2, got {}", stage);
  return std::unique_ptr<ShardedOptimizer>(new Zero(comm, options, stage));
}

}  // namespace shardlab::parallel_detail
