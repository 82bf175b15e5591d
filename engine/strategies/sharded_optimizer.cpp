// The strategy-independent half of ShardedOptimizer: the factory, one step (micro-batches, loss,
// global norm, clipping), evaluation across ranks and the shard helpers. The training loop is
// ShardedOptimizerBase's.
#include "engine/strategies/sharded_optimizer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine/core/error.h"
#include "engine/core/timer.h"
#include "engine/model/cross_entropy.h"
#include "engine/strategies/strategies.h"
#include "engine/train/step_math.h"
#include "engine/train/step_telemetry.h"
#include "engine/train/training_loop.h"

namespace shardlab {

namespace parallel_detail {

std::vector<double> gather_over_ranks(Communicator& comm, std::span<const double> values) {
  const size_t n = values.size();
  const int world = comm.size();
  Buffer mine = make_buffer(MemCategory::comm, static_cast<int64_t>(2 * n));
  Buffer all = make_buffer(MemCategory::comm, static_cast<int64_t>(2 * n) * world);
  for (size_t i = 0; i < n; ++i) {
    const auto hi = static_cast<float>(values[i]);
    mine[2 * i] = hi;
    mine[2 * i + 1] = static_cast<float>(values[i] - static_cast<double>(hi));
  }
  comm.all_gather(mine, all);
  std::vector<double> out(n * static_cast<size_t>(world));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<double>(all[2 * i]) + static_cast<double>(all[2 * i + 1]);
  return out;
}

std::vector<double> sum_over_ranks(Communicator& comm, std::span<const double> values) {
  const std::vector<double> all = gather_over_ranks(comm, values);
  std::vector<double> sums(values.size(), 0.0);
  for (size_t r = 0; r < static_cast<size_t>(comm.size()); ++r)
    for (size_t i = 0; i < values.size(); ++i) sums[i] += all[r * values.size() + i];
  return sums;
}

int64_t bucket_elements(const ParallelConfig& config) {
  return std::max<int64_t>(1, static_cast<int64_t>(config.bucket_mb * 1024.0 * 1024.0 / 4.0));
}

}  // namespace parallel_detail

using parallel_detail::sum_over_ranks;

ShardedOptions launched_on(const Communicator& comm, ShardedOptions options) {
  options.sharding.world_size = comm.size();
  options.sharding.backend = comm.backend();
  options.sharding.timeout_s = static_cast<double>(comm.options().timeout.count()) / 1000.0;
  return options;
}

std::unique_ptr<ShardedOptimizer> ShardedOptimizer::create(Communicator& comm,
                                                           const ShardedOptions& options,
                                                           std::unique_ptr<Optimizer> wrapped) {
  const std::string& s = options.sharding.strategy;
  SL_ENFORCE(options.train.accumulation_steps >= 1,
             "train.accumulation_steps: must be >= 1, got {}", options.train.accumulation_steps);
  SL_ENFORCE(options.train.batch_size % (comm.size() * options.train.accumulation_steps) == 0,
             "train.batch_size: must be divisible by world size x train.accumulation_steps = {}, "
             "got {}",
             comm.size() * options.train.accumulation_steps, options.train.batch_size);
  SL_ENFORCE(options.sharding.world_size == comm.size(),
             "parallel.world_size: the job asks for {} ranks, but the communicator has {}",
             options.sharding.world_size, comm.size());
  // The launch settings must describe the communicator the ranks really use.
  SL_ENFORCE(options.sharding.backend == comm.backend(),
             "parallel.backend: the job says {}, but its ranks communicate over {}",
             options.sharding.backend, comm.backend());
  const auto timeout = std::chrono::milliseconds(
      static_cast<int64_t>(std::llround(options.sharding.timeout_s * 1000.0)));
  SL_ENFORCE(comm.options().timeout == timeout,
             "parallel.timeout_s: the job says {} s, but the communicator waits {} s",
             options.sharding.timeout_s,
             static_cast<double>(comm.options().timeout.count()) / 1000.0);
  SL_ENFORCE(std::isfinite(options.sharding.bucket_mb) && options.sharding.bucket_mb > 0 &&
                 options.sharding.bucket_mb <= 4096,
             "parallel.bucket_mb: must be in (0, 4096] MiB, got {}", options.sharding.bucket_mb);
  SL_ENFORCE_T(InternalError,
               !options.device_comm ||
                   (options.device_comm->size() == comm.size() &&
                    options.device_comm->rank() == comm.rank() && options.device != nullptr),
               "ShardedOptimizer: the device communicator must span the same ranks as the "
               "rank's, with a device for its memory");
  ShardedOptions o = options;
  if (wrapped) o.optimizer = wrapped->config();
  std::unique_ptr<ShardedOptimizer> opt;
  if (s == "ddp") {
    opt = parallel_detail::make_ddp(comm, o);
  } else if (s == "zero1") {
    opt = parallel_detail::make_zero(comm, o, 1);
  } else if (s == "zero2") {
    opt = parallel_detail::make_zero(comm, o, 2);
  } else if (s == "fsdp") {
    opt = parallel_detail::make_fsdp(comm, o);
  } else {
    SL_THROW(InvalidArgument,
             "parallel.strategy: '{}' is not a sharded strategy (expected ddp, zero1, zero2 or "
             "fsdp)",
             s);
  }
  SL_ENFORCE(!options.sharding.fsdp_keep_params || s == "fsdp",
             "parallel.fsdp_keep_params: only used by fsdp, not {}", s);
  opt->optimizer_ = std::move(wrapped);  // options.optimizer is already its config
  opt->setup();
  return opt;
}

ShardedOptimizer::ShardedOptimizer(Communicator& comm, const ShardedOptions& options)
    : ShardedOptimizerBase(comm, options, nullptr, "ShardedOptimizer"),
      topology_(Topology::make({1, 1, comm.size()}, comm.size())),
      micro_steps_(options.train.accumulation_steps) {}

ShardedOptimizer::~ShardedOptimizer() = default;

void ShardedOptimizer::setup() {
  build_model_and_optimizer(ModelStorage::owned);
}

void ShardedOptimizer::build_model_and_optimizer(ModelStorage storage, int64_t pad_multiple) {
  if (options_.blocks) {
    model_ = std::make_unique<Model>(options_.model, options_.blocks(), storage, pad_multiple,
                                     options_.device);
    if (storage == ModelStorage::owned) model_->init(options_.model.seed);
  } else {
    model_ = build_model(options_.model, storage, pad_multiple, options_.device);
  }
  if (!optimizer_) optimizer_ = make_optimizer(options_.optimizer);
}

// --- shard helpers -------------------------------------------------------------------------

IndexRange ShardedOptimizer::local_chunk(int unit) const {
  const ShardUnit& u = layout_.units()[static_cast<size_t>(unit)];
  return {u.shard_offset, u.shard_offset + u.chunk};
}

void ShardedOptimizer::pack_shard(std::span<const float> padded_flat,
                                  std::span<float> shard) const {
  for (int i = 0; i < static_cast<int>(layout_.units().size()); ++i) {
    const ShardUnit& u = layout_.units()[static_cast<size_t>(i)];
    const IndexRange c = layout_.chunk(i, rank());
    std::copy_n(padded_flat.begin() + u.padded_begin + c.begin, u.chunk,
                shard.begin() + u.shard_offset);
  }
}

void ShardedOptimizer::pack_shard(DeviceSpan<const float> padded_flat,
                                  DeviceSpan<float> shard) const {
  for (int i = 0; i < static_cast<int>(layout_.units().size()); ++i) {
    const ShardUnit& u = layout_.units()[static_cast<size_t>(i)];
    const IndexRange c = layout_.chunk(i, rank());
    model_->device().copy(padded_flat.subspan(u.padded_begin + c.begin, u.chunk),
                          shard.subspan(u.shard_offset, u.chunk));
  }
}

void ShardedOptimizer::unpack_shard(std::span<const float> shard,
                                    std::span<float> padded_flat) const {
  for (int i = 0; i < static_cast<int>(layout_.units().size()); ++i) {
    const ShardUnit& u = layout_.units()[static_cast<size_t>(i)];
    const IndexRange c = layout_.chunk(i, rank());
    std::copy_n(shard.begin() + u.shard_offset, u.chunk,
                padded_flat.begin() + u.padded_begin + c.begin);
  }
}

std::vector<int> ShardedOptimizer::units_ready_after(int block) const {
  // Backward runs from the last block to the first, so once `block` is done every gradient at or
  // after its first element is final; a unit is ready when its first element is.
  const IndexRange r = model_->layout().block_range(block);
  std::vector<int> ready;
  if (r.size() == 0) return ready;
  const int64_t from = r.begin, upto = r.end;
  for (int i = 0; i < static_cast<int>(layout_.units().size()); ++i) {
    const int64_t b = layout_.units()[static_cast<size_t>(i)].begin;
    if (b >= from && b < upto) ready.push_back(i);
  }
  // Highest first: the order backward finishes them.
  std::reverse(ready.begin(), ready.end());
  return ready;
}

void ShardedOptimizer::wait_all(std::vector<WorkHandle>& handles) {
  for (auto& h : handles) h->wait();
  handles.clear();
}

// --- one step ------------------------------------------------------------------------------

StepOutcome ShardedOptimizer::run_step(const Dataset& data, const std::vector<int64_t>& indices,
                                       int64_t step, double lr) {
  begin_step();
  MicroBatchHooks hooks;
  hooks.blocks = this;
  hooks.begin = [this](int64_t m) { micro_ = static_cast<int>(m); };
  hooks.end = [this](int64_t m) { end_micro_step(m + 1 == micro_steps_); };
  hooks.check_finite = false;  // checked below on every rank at once, so no rank waits alone
  hooks.slowdown = slowdown_.at_step(step + 1);  // steps count from 1
  if (telemetry_)
    hooks.phase = [this](telemetry::Phase phase, int64_t m, double start, double end) {
      publish_phase(telemetry_, rank(), 0, static_cast<int>(m), phase, start, end);
    };
  const MicroBatchOutcome mb =
      run_micro_batches(*model_, data, indices, micro_steps_, step, batch_, dlogits_, hooks);
  // One exchange gives the global mean loss and the global gradient norm, in rank order, so
  // every rank gets the same bits (and so the same clipping).
  const double local[2] = {mb.loss, owned_grad_square_sum()};
  const std::vector<double> total = parallel_detail::sum_over_ranks(comm_, local);
  StepOutcome out;
  out.loss = total[0] / static_cast<double>(world_size());
  SL_ENFORCE(std::isfinite(out.loss),
             "training diverged: loss is {} at step {} (try a lower optimizer.lr)", out.loss,
             step + 1);
  out.grad_norm = std::sqrt(total[1]);
  out.samples = mb.samples * world_size();
  out.rows = mb.rows * world_size();
  const double coef = clip_coefficient(out.grad_norm, options_.train.clip_grad_norm);
  if (coef < 1.0) scale_grads(static_cast<float>(coef));
  const double update_start = telemetry_ ? telemetry::now_seconds() : 0.0;
  update(lr);
  if (telemetry_)
    publish_phase(telemetry_, rank(), 0, -1, telemetry::Phase::optimizer, update_start,
                  telemetry::now_seconds());
  finish_step(out.grad_norm);
  return out;
}

// --- evaluation ----------------------------------------------------------------------------

EvalResult ShardedOptimizer::evaluate(const Dataset& data, int64_t max_samples) {
  // Every rank runs the same number of forwards (FSDP gathers in each): the shares differ by at
  // most one sample, and a rank whose share is used up repeats a sample it does not count.
  const EvalShare share =
      eval_share(data.size(), max_samples, std::max<int64_t>(options_.train.batch_size, 256),
                 world_size(), rank());
  SoftmaxCrossEntropy loss_fn;
  Batch b;
  std::vector<int64_t> idx;
  double loss_sum = 0, rows = 0, correct = 0;
  in_eval_ = true;
  for (int64_t k = 0; k < share.rounds; ++k) {
    share.round(k, idx);
    const bool counted = !idx.empty();
    if (!counted) idx.push_back(0);
    data.gather(idx, b);
    const Tensor& logits = model_->forward(b.input, this);
    const double l = loss_fn.forward(logits, b.targets);
    if (!counted) continue;
    const auto r = static_cast<double>(b.targets.size());
    loss_sum += l * r;
    rows += r;
    correct += static_cast<double>(count_correct(logits, b.targets));
  }
  in_eval_ = false;
  const double local[3] = {loss_sum, rows, correct};
  const std::vector<double> t = sum_over_ranks(comm_, local);
  return eval_result(t[0], t[1], t[2], share.take);
}

std::vector<float> ShardedOptimizer::gather_params() {
  std::vector<float> full(static_cast<size_t>(model_->num_params()));
  gather_full_params(full);
  return full;
}

}  // namespace shardlab
