// GpuTrainer: engine/train/trainer.cpp step for step on a GPU, and (with an nccl communicator) the
// CPU DDP strategy's step (engine/strategies/ddp.cpp, sharded_optimizer.cpp) on one GPU per rank:
//
//   one GPU   sampler batch -> micro-batches (forward_loss, backward with 1/count) -> global norm
//             -> clip -> optimizer update
//   W GPUs    the sampler gives rank r its contiguous slice r of every global batch (Sampler with
//             rank and world, as ShardedOptimizer::ensure_sampler); its micro-batches as above;
//             gradients all-reduced (sum, then x 1/W: the threads backend's Avg, same order); the
//             step's loss is the mean over ranks of each rank's loss, summed in rank order in
//             double as sum_over_ranks does (each loss sent as a float pair hi + lo); then the
//             norm of the reduced gradient, clipping and the update on every rank alike.
#include "engine/device/gpu_trainer.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "engine/core/error.h"
#include "engine/data/sampler.h"
#include "engine/device/cuda_buffer.h"
#include "engine/device/pinned_buffer.h"
#include "engine/train/step_math.h"
#include "engine/train/training_loop.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/sq_norm.h"

#if defined(SHARDLAB_HAVE_NCCL) && SHARDLAB_HAVE_NCCL
#include "engine/comm/nccl/communicator.h"
#endif

namespace shardlab {

namespace {

#if defined(SHARDLAB_HAVE_NCCL) && SHARDLAB_HAVE_NCCL

// A CUDA event without timing, on the context's device.
class Event {
 public:
  Event() {
    SL_CUDA_CHECK(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming), "cudaEventCreate");
  }
  ~Event() { (void)cudaEventDestroy(e_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

NcclCommunicator& nccl_of(Communicator& c) {
  auto* n = dynamic_cast<NcclCommunicator*>(&c);
  SL_ENFORCE_T(InternalError, n != nullptr, "GpuTrainer: the communicator is not an nccl one");
  return *n;
}

// The compute stream waits (on the GPU) for everything queued so far on the NCCL stream.
void compute_waits_for_nccl(NcclCommunicator& comm, CudaContext& ctx, const Event& ev) {
  SL_CUDA_CHECK(cudaEventRecord(ev.get(), comm.stream()), "cudaEventRecord (nccl stream)");
  SL_CUDA_CHECK(cudaStreamWaitEvent(ctx.stream(), ev.get(), 0), "cudaStreamWaitEvent (nccl)");
}

// Starts gathering `values` from every rank: each value as a float pair (hi, lo), as
// parallel_detail::gather_over_ranks sends it, through `up` (pinned, 2 * n floats, which must stay
// untouched until the handle completes) and `mine` into `all` (2 * n * world floats, device). The
// caller waits on the handle, orders the compute stream after NCCL and reads `all` back.
WorkHandle start_gather(NcclCommunicator& comm, CudaContext& ctx, std::span<const double> values,
                        PinnedBuffer<float>& up, CudaBuffer<float>& mine,
                        CudaBuffer<float>& all) {
  const size_t n = values.size();
  SL_ENFORCE_T(InternalError, up.size() >= 2 * n, "GpuTrainer: staging for {} figures, need {}",
               up.size() / 2, n);
  for (size_t i = 0; i < n; ++i) {
    const auto hi = static_cast<float>(values[i]);
    up.data()[2 * i] = hi;
    up.data()[2 * i + 1] = static_cast<float>(values[i] - static_cast<double>(hi));
  }
  mine.resize(2 * n);
  all.resize(2 * n * static_cast<size_t>(comm.size()));
  SL_CUDA_CHECK(
      cudaMemcpyAsync(mine.data(), up.data(), mine.bytes(), cudaMemcpyHostToDevice, ctx.stream()),
      "cudaMemcpyAsync (rank figures up)");
  // The communicator's stream waits for the compute stream (set_compute_stream), so for the copy.
  return comm.all_gather_async(std::span<const float>(mine.data(), mine.size()),
                               std::span<float>(all.data(), all.size()));
}

// The per-value sums over ranks of a gathered `all` copied to `host`, in rank order, as
// parallel_detail::sum_over_ranks adds them.
std::vector<double> sums_of(const float* host, size_t n, int world) {
  std::vector<double> sums(n, 0.0);
  for (size_t r = 0; r < static_cast<size_t>(world); ++r)
    for (size_t i = 0; i < n; ++i)
      sums[i] += static_cast<double>(host[2 * (r * n + i)]) +
                 static_cast<double>(host[2 * (r * n + i) + 1]);
  return sums;
}

#endif

void copy_down(void* dst, const void* src, size_t bytes, CudaContext& ctx, const char* what) {
  SL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx.stream()), what);
}

}  // namespace

GpuTrainer::GpuTrainer(GpuModel& model, GpuOptimizer& optimizer, const Dataset& train,
                       const Dataset* eval, const TrainConfig& config, double base_lr,
                       Communicator* data_parallel)
    : model_(model),
      optimizer_(optimizer),
      train_(train),
      eval_(eval),
      config_(config),
      base_lr_(base_lr),
      dp_(data_parallel) {
  total_steps_ = checked_total_steps(config, train);
  SL_ENFORCE(optimizer.size() == model.num_params(),
             "GpuTrainer: the optimizer holds state for {} elements, the model has {} parameters",
             optimizer.size(), model.num_params());
  if (dp_) {
#if defined(SHARDLAB_HAVE_NCCL) && SHARDLAB_HAVE_NCCL
    SL_ENFORCE(std::string_view(dp_->backend()) == "nccl",
               "GpuTrainer: data parallel on GPUs runs over an nccl communicator, got {}",
               dp_->backend());
    SL_ENFORCE(config.batch_size % (dp_->size() * config.accumulation_steps) == 0,
               "train.batch_size: must be divisible by world size x train.accumulation_steps = {}, "
               "got {}",
               dp_->size() * config.accumulation_steps, config.batch_size);
    SL_ENFORCE(nccl_of(*dp_).device() == model.context().device(),
               "GpuTrainer: the communicator is on GPU {}, the model on GPU {}",
               nccl_of(*dp_).device(), model.context().device());
#else
    SL_THROW(InvalidArgument,
             "GpuTrainer: data parallel on GPUs needs NCCL, and this shardlab was built without "
             "it");
#endif
  }
}

EvalResult GpuTrainer::evaluate(const Dataset& data, int64_t max_samples) {
  const int parts = dp_ ? dp_->size() : 1, part = dp_ ? dp_->rank() : 0;
  const EvalShare share =
      eval_share(data.size(), max_samples, std::max<int64_t>(config_.batch_size, 256), parts, part);
  model_.context().make_current();
  // No collective inside a round here, so a rank whose share is used up just stops.
  const EvalSums sums = sum_eval_rounds(share, data, [&](const Batch& b, int64_t& correct) {
    return model_.forward_loss(b, &correct);
  });
  if (!dp_)
    return eval_result(sums.loss_sum, static_cast<double>(sums.rows),
                       static_cast<double>(sums.correct), share.take);
#if defined(SHARDLAB_HAVE_NCCL) && SHARDLAB_HAVE_NCCL
  NcclCommunicator& comm = nccl_of(*dp_);
  CudaContext& ctx = model_.context();
  comm.set_compute_stream(ctx.stream());
  const double local[3] = {sums.loss_sum, static_cast<double>(sums.rows),
                           static_cast<double>(sums.correct)};
  CudaBuffer<float> mine(MemCategory::comm, 6), all(MemCategory::comm, 6 * comm.size());
  ctx.order_after_default_stream();
  PinnedBuffer<float> up(6), down(6 * static_cast<size_t>(comm.size()));
  WorkHandle h = start_gather(comm, ctx, local, up, mine, all);
  h->wait();
  Event ev;
  compute_waits_for_nccl(comm, ctx, ev);
  copy_down(down.data(), all.data(), all.bytes(), ctx, "cudaMemcpyAsync (evaluation figures)");
  ctx.sync("reading the evaluation figures");
  const std::vector<double> t = sums_of(down.data(), 3, comm.size());
  return eval_result(t[0], t[1], t[2], share.take);
#else
  SL_THROW(InternalError, "GpuTrainer: data parallel without NCCL");
#endif
}

TrainResult GpuTrainer::run(const TrainerCallbacks& callbacks) {
  CudaContext& ctx = model_.context();
  ctx.make_current();
  const int world = dp_ ? dp_->size() : 1;
  SamplerOptions sopt;
  sopt.batch_size = config_.batch_size;
  sopt.seed = config_.seed;
  sopt.rank = dp_ ? dp_->rank() : 0;
  sopt.world = world;
  Sampler sampler(train_.size(), sopt);
  Batch batch;
  EarlyStopState early;
  const int64_t n = model_.num_params();
  const int64_t count = config_.accumulation_steps;
  CudaBuffer<double> norm_dev(MemCategory::activations, 1);  // scratch, not a gradient
  PinnedBuffer<double> norm_host(1);
#if defined(SHARDLAB_HAVE_NCCL) && SHARDLAB_HAVE_NCCL
  CudaBuffer<float> mine(MemCategory::comm, 2), all(MemCategory::comm, 2 * world);
  PinnedBuffer<float> up(2), gathered(2 * static_cast<size_t>(world));
  std::unique_ptr<Event> nccl_done;
  if (dp_) {
    nccl_of(*dp_).set_compute_stream(ctx.stream());
    nccl_done = std::make_unique<Event>();
  }
#endif
  ctx.order_after_default_stream();

  LoopSpec spec = whole_run_loop(config_, base_lr_, total_steps_, sampler);
  if (eval_) spec.evaluate = [&](int64_t max_samples) { return evaluate(*eval_, max_samples); };
  spec.step = [&](int64_t step, double lr) {
    const std::vector<int64_t> idx = sampler.next();
    model_.zero_grad();
    // run_micro_batches on the device: each micro-batch's mean loss, its gradients scaled by
    // 1/count so that the sum is the gradient of the mean over the whole batch.
    const auto scale = static_cast<float>(1.0 / static_cast<double>(count));
    double loss_sum = 0;
    StepOutcome out;
    for (int64_t m = 0; m < count; ++m) {
      if (count == 1)
        train_.gather(idx, batch);
      else
        train_.gather(micro_batch(idx, count, m), batch);
      const double loss = model_.forward_loss(batch);
      // One GPU checks every micro-batch (as run_micro_batches); data parallel checks the
      // combined loss below, on every rank at once, so no rank waits alone.
      SL_ENFORCE(dp_ != nullptr || std::isfinite(loss),
                 "training diverged: loss is {} at step {} (try a lower optimizer.lr)", loss,
                 step + 1);
      loss_sum += loss;
      out.samples += batch.samples();
      out.rows += static_cast<int64_t>(batch.targets.size());
      model_.backward(count > 1 ? scale : 1.0f);
    }
    out.loss = loss_sum / static_cast<double>(count);
    if (dp_) {
#if defined(SHARDLAB_HAVE_NCCL) && SHARDLAB_HAVE_NCCL
      NcclCommunicator& comm = nccl_of(*dp_);
      // The communicator's stream waits for the backward queued on the compute stream.
      WorkHandle reduce = comm.all_reduce_async(std::span<float>(model_.grads(), n), ReduceOp::Sum);
      const double local[1] = {out.loss};
      WorkHandle losses = start_gather(comm, ctx, local, up, mine, all);
      reduce->wait();
      losses->wait();
      compute_waits_for_nccl(comm, ctx, *nccl_done);
      if (world > 1)
        device_call("scale_cuda", [&] {
          kernels::scale_cuda(model_.grads(), n, 1.0f / static_cast<float>(world), ctx.stream());
        });
      copy_down(gathered.data(), all.data(), all.bytes(), ctx, "cudaMemcpyAsync (step losses)");
      out.samples *= world;
      out.rows *= world;
#endif
    }
    device_call("sq_norm",
                [&] { kernels::sq_norm_cuda(model_.grads(), n, norm_dev.data(), ctx.stream()); });
    copy_down(norm_host.data(), norm_dev.data(), sizeof(double), ctx,
              "cudaMemcpyAsync (gradient norm)");
    ctx.sync("the training step's gradients");
    const double sq = norm_host.data()[0];
#if defined(SHARDLAB_HAVE_NCCL) && SHARDLAB_HAVE_NCCL
    if (dp_) {
      out.loss = sums_of(gathered.data(), 1, world)[0] / static_cast<double>(world);
      SL_ENFORCE(std::isfinite(out.loss),
                 "training diverged: loss is {} at step {} (try a lower optimizer.lr)", out.loss,
                 step + 1);
    }
#endif
    out.grad_norm = std::sqrt(sq);
    const double coef = clip_coefficient(out.grad_norm, config_.clip_grad_norm);
    if (coef < 1.0)
      device_call("scale_cuda", [&] {
        kernels::scale_cuda(model_.grads(), n, static_cast<float>(coef), ctx.stream());
      });
    optimizer_.step(model_.params(), model_.grads(), lr);
    return out;
  };
  TrainResult result = run_training_loop(spec, early, callbacks);
  result.params = model_.download_params();
  return result;
}

}  // namespace shardlab
