// FSDP / ZeRO-3: parameters sharded at rest, one unit per model block (each padded to a multiple
// of the world size; rank r holds chunk r of every block: Psi''/N elements).
//
// Forward:  before block b, all-gather its parameters into a temporary buffer (prefetching block
//           b+1's with overlap on); after it, free them (unless parallel.fsdp_keep_params).
// Backward: before block b, all-gather again (or reuse the kept copy) and allocate its gradient
//           buffer (prefetching block b-1); after it, free the parameters and reduce-scatter the
//           gradients into this rank's gradient shard, freeing the buffer once that completes
//           (at once with overlap off; with overlap on while the next block computes, so at most
//           two blocks of gradients are ever live).
// The update runs on the shards only; nothing is gathered afterwards. Everything is on the model's
// device: collectives through DeviceCollectives, the accumulation, norm, clipping and update as
// the device's kernels.
#include <optional>

#include "engine/comm/device_collectives.h"
#include "engine/core/error.h"
#include "engine/device/device_buffer.h"
#include "engine/strategies/strategies.h"

namespace shardlab::parallel_detail {

namespace {

class Fsdp final : public ShardedOptimizer {
 public:
  Fsdp(Communicator& comm, const ShardedOptions& options) : ShardedOptimizer(comm, options) {}
  // Collectives still in flight (a step that failed) finish before their buffers are freed.
  ~Fsdp() override {
    pending_.clear();
    for (auto& w : gather_work_) w.reset();
  }

 protected:
  void setup() override {
    build_model_and_optimizer(ModelStorage::external);
    Device& dev = model_->device();
    layout_ = ShardLayout::blocks(model_->layout(), world_size());
    const int blocks = model_->num_blocks();
    gathered_.resize(static_cast<size_t>(blocks));
    gather_work_.resize(static_cast<size_t>(blocks));
    grad_bufs_.resize(static_cast<size_t>(blocks));
    param_shard_ = DeviceBuffer<float>(dev, MemCategory::params, layout_.shard_size());
    grad_shard_ = DeviceBuffer<float>(dev, MemCategory::grads, layout_.shard_size());
    // Initialise block by block: materialise one block, run its initialiser exactly as a full
    // model would (Rng::derive(seed, block)), keep this rank's chunk.
    for (int b = 0; b < blocks; ++b) {
      const int u = layout_.unit_of_block(b);
      if (u < 0) continue;
      const ShardUnit& unit = layout_.units()[static_cast<size_t>(u)];
      DeviceBuffer<float> full(dev, MemCategory::params, unit.padded);
      model_->bind_block(b, full.data(), {});
      model_->init_block(b, options_.model.seed);
      const IndexRange c = layout_.chunk(u, rank());
      dev.copy(DeviceSpan<const float>(full.span()).subspan(c.begin, unit.chunk),
               shard(param_shard_, unit));
      model_->bind_block(b, {}, {});
    }
    optimizer_->attach({0, layout_.shard_size()}, dev);
    collectives_.emplace(data_comm(), dev);
  }

  // This rank's chunk of `unit` in a shard buffer.
  static DeviceSpan<float> shard(DeviceBuffer<float>& buf, const ShardUnit& unit) {
    return buf.span().subspan(unit.shard_offset, unit.chunk);
  }

  // --- gathering ---
  void start_gather(int block) {
    const int u = layout_.unit_of_block(block);
    if (u < 0 || !gathered_[static_cast<size_t>(block)].empty()) return;
    const ShardUnit& unit = layout_.units()[static_cast<size_t>(u)];
    auto& buf = gathered_[static_cast<size_t>(block)];
    buf = DeviceBuffer<float>(model_->device(), MemCategory::params, unit.padded);
    gather_work_[static_cast<size_t>(block)] = collectives_->all_gather_async(
        DeviceSpan<const float>(shard(param_shard_, unit)), buf.span(), {CommArray::params, u});
  }

  DevicePtr<float> gathered(int block) {
    start_gather(block);
    auto& work = gather_work_[static_cast<size_t>(block)];
    if (work) {
      work->wait();
      work.reset();
    }
    return gathered_[static_cast<size_t>(block)].data();
  }

  void free_gathered(int block) {
    auto& work = gather_work_[static_cast<size_t>(block)];
    if (work) {
      work->wait();
      work.reset();
    }
    gathered_[static_cast<size_t>(block)].reset();
  }

  // The next (step +1) or previous (-1) block that has parameters, or -1.
  int neighbour(int block, int step) const {
    for (int b = block + step; b >= 0 && b < model_->num_blocks(); b += step)
      if (layout_.unit_of_block(b) >= 0) return b;
    return -1;
  }

  // --- hooks ---
  void before_forward(int block) override {
    if (layout_.unit_of_block(block) < 0) return;
    model_->bind_block(block, gathered(block), {});
    if (options_.sharding.overlap) {
      const int next = neighbour(block, +1);
      if (next >= 0) start_gather(next);
    }
  }

  void after_forward(int block) override {
    if (layout_.unit_of_block(block) < 0) return;
    if (in_eval_ || !options_.sharding.fsdp_keep_params) free_gathered(block);
  }

  void before_backward(int block) override {
    const int u = layout_.unit_of_block(block);
    if (u < 0) return;
    const DevicePtr<float> params = gathered(block);
    auto& g = grad_bufs_[static_cast<size_t>(block)];
    g = DeviceBuffer<float>(model_->device(), MemCategory::grads,
                            layout_.units()[static_cast<size_t>(u)].padded);
    model_->bind_block(block, params, g.data());
    if (options_.sharding.overlap) {
      const int prev = neighbour(block, -1);
      if (prev >= 0) start_gather(prev);
    }
  }

  void after_backward(int block) override {
    const int u = layout_.unit_of_block(block);
    if (u < 0) return;
    free_gathered(block);
    // At most one reduction in flight: the previous block's finishes (and frees its gradient
    // buffer) before this one starts, so FSDP never holds more than two blocks of gradients.
    finish_reductions();
    const ShardUnit& unit = layout_.units()[static_cast<size_t>(u)];
    Pending p;
    p.block = block;
    p.unit = u;
    DeviceSpan<float> out = shard(grad_shard_, unit);
    if (micro_ > 0) {  // accumulate: reduce into a temporary, add after
      p.partial = DeviceBuffer<float>(model_->device(), MemCategory::comm, unit.chunk);
      out = p.partial.span();
    }
    p.work = collectives_->reduce_scatter_async(
        DeviceSpan<const float>(grad_bufs_[static_cast<size_t>(block)].span()), out, ReduceOp::Avg,
        {CommArray::grads, u});
    pending_.push_back(std::move(p));
    if (!options_.sharding.overlap) finish_reductions();
  }

  void finish_reductions() {
    Device& dev = model_->device();
    for (Pending& p : pending_) {
      p.work->wait();
      grad_bufs_[static_cast<size_t>(p.block)].reset();
      if (!p.partial.empty()) {
        const DeviceSpan<float> dst =
            shard(grad_shard_, layout_.units()[static_cast<size_t>(p.unit)]);
        dev.add(dst.data(), p.partial.data(), dst.data(), static_cast<int64_t>(dst.size()));
      }
    }
    pending_.clear();
  }

  void end_micro_step(bool last) override {
    (void)last;
    finish_reductions();
    // Nothing gathered survives a micro-step (a prefetch past block 0 cannot happen, but a kept
    // forward copy of a block without backward could).
    for (int b = 0; b < model_->num_blocks(); ++b)
      if (!gathered_[static_cast<size_t>(b)].empty()) free_gathered(b);
  }

  // --- update and state ---
  double owned_grad_square_sum() override {
    return model_->device().squared_norm(grad_shard_.span());
  }
  void scale_grads(float factor) override {
    model_->device().scale(grad_shard_.data(), grad_shard_.size(), factor);
  }
  void update(double lr) override {
    optimizer_->step(param_shard_.span(), DeviceSpan<const float>(grad_shard_.span()), lr);
  }
  std::span<float> held_params() override {
    return {host_address(model_->device(), param_shard_.data()),
            static_cast<size_t>(param_shard_.size())};
  }
  DeviceSpan<float> held_device_params() override { return param_shard_.span(); }

  void load_full_params(std::span<const float> full) override {
    std::vector<float> mine(static_cast<size_t>(layout_.shard_size()), 0.0f);
    for (int i = 0; i < static_cast<int>(layout_.units().size()); ++i) {
      const ShardUnit& u = layout_.units()[static_cast<size_t>(i)];
      const IndexRange c = layout_.chunk(i, rank());
      for (int64_t k = 0; k < u.chunk; ++k) {
        const int64_t at = c.begin + k;  // within the padded unit
        if (at < u.size)
          mine[static_cast<size_t>(u.shard_offset + k)] = full[static_cast<size_t>(u.begin + at)];
      }
    }
    model_->device().copy_from_host(std::span<const float>(mine), param_shard_.span());
  }

  void gather_full_params(std::span<float> full) override {
    Device& dev = model_->device();
    for (int32_t i = 0; i < static_cast<int32_t>(layout_.units().size()); ++i) {
      const ShardUnit& u = layout_.units()[static_cast<size_t>(i)];
      DeviceBuffer<float> unit(dev, MemCategory::comm, u.padded);
      collectives_
          ->all_gather_async(DeviceSpan<const float>(shard(param_shard_, u)), unit.span(),
                             {CommArray::params, i})
          ->wait();
      dev.copy_to_host(DeviceSpan<const float>(unit.span()).first(u.size),
                       full.subspan(u.begin, u.size));
    }
  }

 private:
  // `work` is declared after `partial` so it is destroyed first: a dropped handle waits for (or
  // fails) its operation before the buffer it writes goes away.
  struct Pending {
    int block = 0;
    int unit = 0;
    DeviceBuffer<float> partial;
    WorkHandle work;
  };

  std::optional<DeviceCollectives> collectives_;
  DeviceBuffer<float> param_shard_, grad_shard_;
  std::vector<DeviceBuffer<float>> gathered_;   // per block: gathered parameters while live
  std::vector<WorkHandle> gather_work_;         // per block: the gather in flight
  std::vector<DeviceBuffer<float>> grad_bufs_;  // per block: full gradients until reduce-scattered
  std::vector<Pending> pending_;
};

}  // namespace

std::unique_ptr<ShardedOptimizer> make_fsdp(Communicator& comm, const ShardedOptions& options) {
  return std::unique_ptr<ShardedOptimizer>(new Fsdp(comm, options));
}

}  // namespace shardlab::parallel_detail
