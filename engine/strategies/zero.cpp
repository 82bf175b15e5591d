// ZeRO-1 and ZeRO-2 (Rajbhandari et al. 2019) over flat, padded parameters cut into buckets;
// rank r owns chunk r of every bucket (its shard, Psi'/N elements).
//
//   ZeRO-1: gradients all-reduced per bucket (full gradients kept); each rank updates its shard
//           with optimizer state for the shard only; parameters all-gathered per bucket.
//   ZeRO-2: gradients reduce-scattered per bucket straight into a persistent gradient shard,
//           and the full gradient buffer is freed until the next step's backward; shard update;
//           parameters all-gathered per bucket.
// The shard update runs on a packed copy of the rank's chunks (a communication buffer that
// lives only during the update), which is also the all-gather's input. Everything is on the
// model's device: collectives through DeviceCollectives, the norm, clipping and update as the
// device's kernels.
#include <optional>

#include "engine/comm/device_collectives.h"
#include "engine/core/error.h"
#include "engine/device/device_buffer.h"
#include "engine/strategies/bucketed.h"
#include "engine/strategies/strategies.h"

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
    SL_ENFORCE_T(
        InternalError,
        static_cast<int64_t>(model_->padded_device_params().size()) == layout_.padded_total(),
        "ZeRO: model padding {} differs from the shard layout's {}",
        model_->padded_device_params().size(), layout_.padded_total());
    optimizer_->attach({0, layout_.shard_size()}, model_->device());
    collectives_.emplace(data_comm(), model_->device());
    if (stage_ == 2) {
      grad_shard_ = DeviceBuffer<float>(model_->device(), MemCategory::grads, layout_.shard_size());
      model_->release_grads();
    }
  }

  WorkHandle launch_bucket(int unit) override {
    const ShardUnit& u = layout_.units()[static_cast<size_t>(unit)];
    DeviceSpan<float> grads = model_->padded_device_grads().subspan(u.padded_begin, u.padded);
    const CommSubject subject{CommArray::grads, unit};
    if (stage_ == 1) return collectives_->all_reduce_async(grads, ReduceOp::Avg, subject);
    return collectives_->reduce_scatter_async(
        grads, grad_shard_.span().subspan(u.shard_offset, u.chunk), ReduceOp::Avg, subject);
  }

  void buckets_reduced() override {
    if (stage_ == 2) model_->release_grads();
  }

  double owned_grad_square_sum() override {
    Device& dev = model_->device();
    if (stage_ == 2) return dev.squared_norm(grad_shard_.span());
    double s = 0;
    for_each_owned_grad_chunk([&](DeviceSpan<float> c) { s += dev.squared_norm(c); });
    return s;
  }

  void scale_grads(float factor) override {
    Device& dev = model_->device();
    if (stage_ == 2) {
      dev.scale(grad_shard_.data(), grad_shard_.size(), factor);
      return;
    }
    for_each_owned_grad_chunk(
        [&](DeviceSpan<float> c) { dev.scale(c.data(), static_cast<int64_t>(c.size()), factor); });
  }

  void update(double lr) override {
    Device& dev = model_->device();
    const int64_t n = layout_.shard_size();
    DeviceBuffer<float> params(dev, MemCategory::comm, n);
    pack_shard(model_->padded_device_params(), params.span());
    if (stage_ == 1) {
      DeviceBuffer<float> grads(dev, MemCategory::comm, n);
      pack_shard(model_->padded_device_grads(), grads.span());
      optimizer_->step(params.span(), grads.span(), lr);
    } else {
      optimizer_->step(params.span(), grad_shard_.span(), lr);
    }
    std::vector<WorkHandle> gathers;
    for (int32_t i = 0; i < static_cast<int32_t>(layout_.units().size()); ++i) {
      const ShardUnit& u = layout_.units()[static_cast<size_t>(i)];
      gathers.push_back(collectives_->all_gather_async(
          DeviceSpan<const float>(params.span()).subspan(u.shard_offset, u.chunk),
          model_->padded_device_params().subspan(u.padded_begin, u.padded),
          {CommArray::params, i}));
    }
    wait_all(gathers);
  }

  std::span<float> held_params() override { return model_->params(); }

  void load_full_params(std::span<const float> full) override {
    model_->device().copy_from_host(full, model_->device_params());
  }

  void gather_full_params(std::span<float> full) override {
    model_->device().copy_to_host(model_->device_params(), full);
  }

 private:
  template <class F>
  void for_each_owned_grad_chunk(F&& f) {
    DeviceSpan<float> grads = model_->padded_device_grads();
    for (int i = 0; i < static_cast<int>(layout_.units().size()); ++i) {
      const ShardUnit& u = layout_.units()[static_cast<size_t>(i)];
      f(grads.subspan(u.padded_begin + layout_.chunk(i, rank()).begin, u.chunk));
    }
  }

  int stage_;
  std::optional<DeviceCollectives> collectives_;
  DeviceBuffer<float> grad_shard_;  // ZeRO-2: this rank's reduced gradients
};

}  // namespace

std::unique_ptr<ShardedOptimizer> make_zero(Communicator& comm, const ShardedOptions& options,
                                            int stage) {
  SL_ENFORCE(stage == 1 || stage == 2, "ZeRO stage must be 1 or 2, got {}", stage);
  return std::unique_ptr<ShardedOptimizer>(new Zero(comm, options, stage));
}

}  // namespace shardlab::parallel_detail
