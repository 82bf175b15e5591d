#include "engine/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/core/error.h"
#include "engine/core/timer.h"
#include "engine/data/sampler.h"
#include "engine/model/cross_entropy.h"
#include "engine/train/lr_schedule.h"
#include "engine/train/step_math.h"
#include "engine/train/training_loop.h"

namespace shardlab {

int64_t checked_total_steps(const TrainConfig& config, const Dataset& train) {
  SL_ENFORCE(config.batch_size >= 1, "train.batch_size: must be >= 1, got {}", config.batch_size);
  SL_ENFORCE(config.accumulation_steps >= 1 && config.batch_size % config.accumulation_steps == 0,
             "train.accumulation_steps: must be >= 1 and divide train.batch_size ({}), got {}",
             config.batch_size, config.accumulation_steps);
  SL_ENFORCE(train.size() >= config.batch_size,
             "train.batch_size: {} is larger than the training set ({} samples)", config.batch_size,
             train.size());
  const int64_t per_epoch = train.size() / config.batch_size;
  const int64_t total = config.steps > 0 ? config.steps : config.epochs * per_epoch;
  SL_ENFORCE(total >= 1, "train: neither train.steps nor train.epochs asks for any step");
  return total;
}

Trainer::Trainer(Model& model, Optimizer& optimizer, const Dataset& train, const Dataset* eval,
                 const TrainConfig& config, double base_lr)
    : model_(model),
      optimizer_(optimizer),
      train_(train),
      eval_(eval),
      config_(config),
      base_lr_(base_lr) {
  total_steps_ = checked_total_steps(config, train);
  optimizer_.attach({0, model_.num_params()}, model_.device());
}

EvalResult Trainer::evaluate(const Dataset& data, int64_t max_samples) {
  const EvalShare share =
      eval_share(data.size(), max_samples, std::max<int64_t>(config_.batch_size, 256), 1, 0);
  SoftmaxCrossEntropy loss_fn;
  // One part: every round of the share holds samples.
  const EvalSums sums = sum_eval_rounds(share, data, [&](const Batch& b, int64_t& correct) {
    const Tensor& logits = model_.forward(b.input);
    const double loss = loss_fn.forward(logits, b.targets);
    correct = count_correct(logits, b.targets);
    return loss;
  });
  return eval_result(sums.loss_sum, static_cast<double>(sums.rows),
                     static_cast<double>(sums.correct), share.take);
}

LoopSpec whole_run_loop(const TrainConfig& config, double base_lr, int64_t total_steps,
                        const Sampler& sampler) {
  LoopSpec spec;
  spec.config = &config;
  spec.base_lr = base_lr;
  spec.total_steps = total_steps;
  spec.stop_at = total_steps;
  spec.epoch = [&sampler] { return sampler.epoch(); };
  return spec;
}

TrainResult Trainer::run(const TrainerCallbacks& callbacks) {
  SamplerOptions sopt;
  sopt.batch_size = config_.batch_size;
  sopt.seed = config_.seed;
  Sampler sampler(train_.size(), sopt);
  Batch batch;
  Tensor dlogits;
  EarlyStopState early;

  LoopSpec spec = whole_run_loop(config_, base_lr_, total_steps_, sampler);
  if (eval_) spec.evaluate = [&](int64_t max_samples) { return evaluate(*eval_, max_samples); };
  spec.step = [&](int64_t step, double lr) {
    std::vector<int64_t> idx = sampler.next();
    if (callbacks.reorder_batch) callbacks.reorder_batch(idx);
    model_.zero_grad();
    const MicroBatchOutcome mb =
        run_micro_batches(model_, train_, idx, config_.accumulation_steps, step, batch, dlogits);
    StepOutcome out;
    out.loss = mb.loss;
    out.samples = mb.samples;
    out.rows = mb.rows;
    Device& dev = model_.device();
    out.grad_norm = std::sqrt(dev.squared_norm(model_.device_grads()));
    const double coef = clip_coefficient(out.grad_norm, config_.clip_grad_norm);
    if (coef < 1.0)
      dev.scale(model_.device_grads().data(), model_.num_params(), static_cast<float>(coef));
    optimizer_.step(model_.device_params(), model_.device_grads(), lr);
    return out;
  };
  TrainResult result = run_training_loop(spec, early, callbacks);
  result.params = model_.params_to_host();
  return result;
}

}  // namespace shardlab
