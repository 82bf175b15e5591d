// HybridShardedOptimizer: set-up from the job's pp x tp x dp, one step's
// synchronisation (tp, then dp, then the global norm and the update), evaluation through the
// pipeline, and model files. The pipelined forward/backward itself is in hybrid_step.cpp.
#include "engine/hybrid/hybrid_optimizer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine/comm/device_collectives.h"
#include "engine/core/error.h"
#include "engine/hybrid/hybrid_impl.h"
#include "engine/model/model.h"
#include "engine/strategies/strategies.h"
#include "engine/tensor_parallel/tp_gpt.h"
#include "engine/train/step_math.h"
#include "engine/train/step_telemetry.h"

namespace shardlab {

using parallel_detail::sum_over_ranks;

namespace {

void check_options(Communicator& world, const ShardedOptions& o) {
  const ParallelConfig& p = o.sharding;
  SL_ENFORCE(o.model.kind == "gpt",
             "parallel.{}: tensor and pipeline parallelism need model.kind gpt, got {}",
             p.tp > 1 ? "tp" : "pp", o.model.kind);
  SL_ENFORCE(p.strategy == "ddp" || p.strategy == "zero1" || p.strategy == "zero2",
             "parallel.strategy: with pp or tp > 1 it names the data-parallel strategy: ddp, zero1 "
             "or zero2, got {}",
             p.strategy);
  SL_ENFORCE(o.train.accumulation_steps == 1,
             "train.accumulation_steps: must be 1 with pp or tp > 1 (use parallel.micro_batches), "
             "got {}",
             o.train.accumulation_steps);
  SL_ENFORCE(p.world_size == world.size(),
             "parallel.world_size: the job asks for {} ranks, but the communicator has {}",
             p.world_size, world.size());
  SL_ENFORCE(p.backend == world.backend(),
             "parallel.backend: the job says {}, but its ranks communicate over {}", p.backend,
             world.backend());
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(std::llround(p.timeout_s * 1000.0)));
  SL_ENFORCE(world.options().timeout == timeout,
             "parallel.timeout_s: the job says {} s, but the communicator waits {} s", p.timeout_s,
             static_cast<double>(world.options().timeout.count()) / 1000.0);
  SL_ENFORCE(std::isfinite(p.bucket_mb) && p.bucket_mb > 0 && p.bucket_mb <= 4096,
             "parallel.bucket_mb: must be in (0, 4096] MiB, got {}", p.bucket_mb);
  SL_ENFORCE(!p.fsdp_keep_params, "parallel.fsdp_keep_params: only used by fsdp");
  SL_ENFORCE_T(InternalError, o.device_comm == nullptr,
               "HybridShardedOptimizer: a device communicator (nccl) serves the 1-D strategies in "
               "this version; pp x tp x dp stages its collectives through the rank's");
  SL_ENFORCE(!o.blocks,
             "model: a model of the caller's own blocks runs on ddp, zero1, zero2 or fsdp; tensor "
             "and pipeline parallelism slice the GPT model");
}

// The checked options' topology, after checking that the GPT model fits it.
Topology checked_topology(Communicator& world, const ShardedOptions& o) {
  check_options(world, o);
  const ParallelConfig& p = o.sharding;
  const GptConfig& gpt = o.model.gpt;
  Topology topo = Topology::make({p.pp, p.tp, p.dp}, world.size());
  validate_tp_gpt(gpt, topo.tp());
  check_model_fits(topo, gpt.layers + 2, gpt.heads, gpt.width, p.micro_batches, o.train.batch_size);
  return topo;
}

}  // namespace

std::unique_ptr<HybridShardedOptimizer> HybridShardedOptimizer::create(
    Communicator& world, const ShardedOptions& options, std::unique_ptr<Optimizer> wrapped) {
  return std::unique_ptr<HybridShardedOptimizer>(
      new HybridShardedOptimizer(world, options, std::move(wrapped)));
}

HybridShardedOptimizer::HybridShardedOptimizer(Communicator& world,
                                               std::unique_ptr<Optimizer> wrapped,
                                               const ShardedOptions& options)
    : HybridShardedOptimizer(world, launched_on(world, options), std::move(wrapped)) {}

HybridShardedOptimizer::HybridShardedOptimizer(Communicator& world, const ShardedOptions& options,
                                               std::unique_ptr<Optimizer> wrapped)
    : ShardedOptimizerBase(world, options, std::move(wrapped), "HybridShardedOptimizer"),
      topo_(checked_topology(world, options)),
      impl_(std::make_unique<Impl>()) {
  const ParallelConfig& p = options.sharding;
  const GptConfig& gpt = options.model.gpt;
  Impl& im = *impl_;
  im.groups = topo_.build_groups(world);
  im.tp = TpGroup::of(*im.groups.tp);
  im.coord = topo_.coord(world.rank());
  const int chunks = static_cast<int>(p.pp_chunks);
  im.schedule = make_schedule(p.schedule, topo_.pp(), static_cast<int>(p.micro_batches), chunks);
  im.ops = im.schedule->ops(im.coord.pp);
  int slots = 1;
  for (int c = 0; c < chunks; ++c)
    slots = std::max(slots, max_in_flight(*im.schedule, im.coord.pp, c));
  const int64_t pad = p.strategy == "ddp" ? 1 : topo_.dp();
  im.stage = std::make_unique<PipelineStage>(
      gpt,
      stage_chunks(model_layout(options.model), topo_.pp(), chunks, p.pp_partition, im.coord.pp),
      slots, im.tp, pad, options.device);
  im.stage->init(options.model.seed);
  im.tp_sync =
      std::make_unique<TensorParallelGradSync>(im.tp, im.stage->layout(), im.stage->slices());
  im.dp_sync = std::make_unique<DataParallelSync>(*im.groups.dp, im.stage->device(), p.strategy,
                                                  im.stage->layout().size(),
                                                  parallel_detail::bucket_elements(p));
  if (!optimizer_) optimizer_ = make_optimizer(options.optimizer);
  im.dp_sync->attach(*optimizer_);
  if (im.dp_sync->frees_grads()) im.stage->release_grads();
  im.vocab = tp_vocab_part(gpt, im.tp);
  im.width = gpt.width;
  im.vocab_size = gpt.vocab_size;
  // Per activation slot of every chunk (chunk c's slot k at c * slots + k).
  const auto all_slots = static_cast<size_t>(chunks * slots);
  im.inputs.resize(all_slots);
  for (size_t k = 0; k < all_slots; ++k) im.losses.emplace_back(im.tp);
  im.out_shapes.resize(all_slots);
  im.act_sends.resize(all_slots);
  im.grad_sends.resize(all_slots);
}

HybridShardedOptimizer::~HybridShardedOptimizer() {
  // Sends still in flight after a failed step must stop touching their buffers first.
  if (impl_) {
    impl_->act_sends.clear();
    impl_->grad_sends.clear();
  }
}

const ParamLayout& HybridShardedOptimizer::local_layout() const {
  return impl_->stage->layout();
}
const ParamLayout& HybridShardedOptimizer::full_layout() const {
  return impl_->stage->full_layout();
}

// --- one step ------------------------------------------------------------------------------

StepOutcome HybridShardedOptimizer::run_step(const Dataset& data,
                                             const std::vector<int64_t>& indices, int64_t step,
                                             double lr) {
  Impl& im = *impl_;
  im.check_usable();
  im.telemetry = telemetry_;
  im.slowdown = slowdown_.at_step(step + 1);  // steps count from 1
  im.world_rank = rank();
  PipelineStage& stage = *im.stage;
  stage.zero_grad();
  Impl::PipelineOutcome pipe;
  try {
    pipe = im.run_pipeline(data, indices, options_.sharding.micro_batches);
  } catch (const std::exception& e) {
    im.fail(e.what());
    throw;
  }
  times_.busy += pipe.busy;
  times_.idle += pipe.idle;
  ++times_.steps;
  // No rank steps before the gradients are synchronised: replicated parameters across tp, then
  // every parameter across dp.
  im.tp_sync->synchronize_grads(stage.device(), stage.grads());
  im.dp_sync->reduce(stage.grads());
  // Each loss and each gradient element counted once: the last stage's first tp rank of every
  // replica brings its loss, every rank its owned gradient elements.
  const bool counts_loss = stage.last() && im.coord.tp == 0;
  const double dp = topo_.dp();
  const double local[3] = {counts_loss ? pipe.loss / dp : 0.0,
                           im.dp_sync->owned_square_sum(stage.grads(), im.tp_sync->not_counted()),
                           counts_loss ? static_cast<double>(pipe.rows) : 0.0};
  if (im.dp_sync->frees_grads()) stage.release_grads();
  const std::vector<double> total = sum_over_ranks(comm_, local);
  StepOutcome out;
  out.loss = total[0];
  SL_ENFORCE(std::isfinite(out.loss),
             "training diverged: loss is {} at step {} (try a lower optimizer.lr)", out.loss,
             step + 1);
  out.grad_norm = std::sqrt(total[1]);
  out.samples = static_cast<int64_t>(indices.size()) * topo_.dp();
  out.rows = static_cast<int64_t>(total[2]);
  const double coef = clip_coefficient(out.grad_norm, options_.train.clip_grad_norm);
  if (coef < 1.0) im.dp_sync->scale(stage.grads(), static_cast<float>(coef));
  const double update_start = im.telemetry ? telemetry::now_seconds() : 0.0;
  im.dp_sync->update(*optimizer_, stage.params(), stage.grads(), lr);
  if (im.telemetry)
    publish_phase(im.telemetry, im.world_rank, im.coord.pp, -1, telemetry::Phase::optimizer,
                  update_start, telemetry::now_seconds());
  finish_step(out.grad_norm);
  return out;
}

// --- evaluation ----------------------------------------------------------------------------

EvalResult HybridShardedOptimizer::evaluate(const Dataset& data, int64_t max_samples) {
  Impl& im = *impl_;
  im.check_usable();
  PipelineStage& stage = *im.stage;
  DeviceCollectives pp(*im.groups.pp, stage.device());
  const int s = im.coord.pp;
  const int p = im.groups.pp->size();
  // The dp replicas share the samples; every rank of a replica runs the same forwards, in rounds
  // of one replica's training batch, so the stage's layers (slot 0) never grow beyond what
  // training holds.
  const EvalShare share = eval_share(
      data.size(), max_samples, options_.train.batch_size / topo_.dp(), topo_.dp(), im.coord.dp);
  VocabParallelCrossEntropy loss_fn(im.tp);
  Batch b;
  Tensor in;
  std::vector<int64_t> idx;
  double loss_sum = 0, rows = 0, correct = 0;
  for (int64_t k = 0; k < share.rounds; ++k) {
    share.round(k, idx);
    const bool counted = !idx.empty();
    if (!counted) idx.push_back(0);
    data.gather(idx, b);
    // Through the stage's chunks in model order: chunk c is virtual stage c * p + s, fed by the
    // previous virtual stage's stage and feeding the next one's.
    const Tensor* y = nullptr;
    for (int c = 0; c < stage.chunks(); ++c) {
      const Tensor* x = &b.input;
      if (!stage.first(c)) {
        in.resize({b.input.dim(0), b.input.dim(1), im.width}, stage.device());
        pp.recv(in.dspan(), (s + p - 1) % p, pipeline_tag(kEvalTag, c));
        x = &in;
      }
      y = &stage.forward(c, 0, *x);
      if (!stage.last(c))
        pp.send(y->dspan(), (s + 1) % p, pipeline_tag(kEvalTag, (c * p + s + 1) / p));
    }
    if (!stage.last()) continue;
    const double l = loss_fn.forward(*y, b.targets, im.vocab.begin, im.vocab_size);
    const double c =
        static_cast<double>(count_correct_vocab_parallel(*y, b.targets, im.vocab.begin, im.tp));
    if (!counted || im.coord.tp != 0) continue;
    const auto r = static_cast<double>(b.targets.size());
    loss_sum += l * r;
    rows += r;
    correct += c;
  }
  const double local[3] = {loss_sum, rows, correct};
  const std::vector<double> t = sum_over_ranks(comm_, local);
  return eval_result(t[0], t[1], t[2], share.take);
}

// --- parameters and optimizer state --------------------------------------------------------

std::vector<float> HybridShardedOptimizer::gather_params() {
  Impl& im = *impl_;
  // Each element is written by exactly one rank (replica 0, and tp rank 0 for replicated
  // parameters) into zeros, so the sum is exact.
  std::vector<float> full(static_cast<size_t>(im.stage->full_layout().size()), 0.0f);
  if (im.coord.dp == 0) im.stage->store_full(full, im.coord.tp == 0);
  comm_.all_reduce(full, ReduceOp::Sum);
  return full;
}

void HybridShardedOptimizer::load_model(const std::string& path) {
  const std::vector<float> full = read_model_file(path, full_layout());
  impl_->stage->load_full(full);
}

void HybridShardedOptimizer::synchronize_optimizer_state() {
  Impl& im = *impl_;
  if (im.dp_sync->strategy() == "ddp") {
    parallel_detail::broadcast_optimizer_state(*im.groups.dp, *optimizer_);
    return;
  }
  SL_ENFORCE(optimizer_->range().size() == im.dp_sync->owned_elements(),
             "synchronize_optimizer_state: rank {}'s optimizer holds {} elements, its shard is {}",
             rank(), optimizer_->range().size(), im.dp_sync->owned_elements());
  parallel_detail::check_optimizer_steps_agree(*im.groups.dp, *optimizer_);
}

}  // namespace shardlab
