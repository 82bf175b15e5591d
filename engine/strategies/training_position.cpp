#include "engine/strategies/training_position.h"

#include <algorithm>

#include "engine/core/error.h"

namespace shardlab::parallel_detail {

TrainingProgress TrainingPosition::progress(const Optimizer& optimizer) const {
  TrainingProgress p;
  p.steps_done = steps_done;
  p.has_sampler = sampler_ != nullptr || has_pending_;
  p.sampler = sampler_ ? sampler_->state() : pending_;
  p.early = early;
  p.optimizer_steps = optimizer.steps();
  return p;
}

void TrainingPosition::restore(const TrainingProgress& p, Optimizer& optimizer) {
  optimizer.restore_steps(p.optimizer_steps);
  steps_done = p.steps_done;
  early = p.early;
  if (!p.has_sampler) return;
  if (sampler_) {
    sampler_->set_state(p.sampler);
  } else {
    pending_ = p.sampler;
    has_pending_ = true;
  }
}

TrainResult TrainingPosition::run(const OptimizeInput& input, const ShardedOptions& options,
                                  int slice, int slices, const char* who, const StepFn& step,
                                  const EvalFn& evaluate) {
  SL_ENFORCE(input.train != nullptr, "{}::optimize: no training data", who);
  const Dataset& train = *input.train;
  const TrainConfig& t = options.train;
  if (!sampler_) {
    SamplerOptions so;
    so.batch_size = t.batch_size;
    so.seed = t.seed;
    so.rank = slice;
    so.world = slices;
    sampler_ = std::make_unique<Sampler>(train.size(), so);
    if (has_pending_) sampler_->set_state(pending_);
    has_pending_ = false;
  }
  SL_ENFORCE(sampler_->dataset_size() == train.size(),
             "{}: the training set changed size ({} -> {} samples)", who, sampler_->dataset_size(),
             train.size());
  total_steps = t.steps > 0 ? t.steps : t.epochs * sampler_->batches_per_epoch();
  SL_ENFORCE(total_steps >= 1, "train: neither train.steps nor train.epochs asks for any step");
  LoopSpec spec;
  spec.config = &t;
  spec.base_lr = options.optimizer.lr;
  spec.total_steps = total_steps;
  spec.first_step = steps_done;
  spec.stop_at =
      input.max_steps > 0 ? std::min(total_steps, steps_done + input.max_steps) : total_steps;
  spec.after_step = input.after_step;
  spec.epoch = [this] { return sampler_->epoch(); };
  if (input.eval)
    spec.evaluate = [&evaluate, &input](int64_t max_samples) {
      return evaluate(*input.eval, max_samples);
    };
  spec.step = [this, &step](int64_t s, double lr) { return step(sampler_->next(), s, lr); };
  return run_training_loop(spec, early, input.callbacks);
}

}  // namespace shardlab::parallel_detail
