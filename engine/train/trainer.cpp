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

namespace shardlab {

Trainer::Trainer(Model& model, Optimizer& optimizer, const Dataset& train, const Dataset* eval,
                 const TrainConfig& config, double base_lr)
    : model_(model),
      optimizer_(optimizer),
      train_(train),
      eval_(eval),
      config_(config),
      base_lr_(base_lr) {
  SL_ENFORCE(config.batch_size >= 1, "train.batch_size: must be >= 1, got {}", config.batch_size);
  SL_ENFORCE(config.accumulation_steps >= 1 && config.batch_size % config.accumulation_steps == 0,
             "train.accumulation_steps: must be >= 1 and divide train.batch_size ({}), got {}",
             config.batch_size, config.accumulation_steps);
  SL_ENFORCE(train.size() >= config.batch_size,
             "train.batch_size: {} is larger than the training set ({} samples)", config.batch_size,
             train.size());
  const int64_t per_epoch = train.size() / config.batch_size;
  total_steps_ = config.steps > 0 ? config.steps : config.epochs * per_epoch;
  SL_ENFORCE(total_steps_ >= 1, "train: neither train.steps nor train.epochs asks for any step");
  optimizer_.attach({0, model_.num_params()});
}

EvalResult Trainer::evaluate(const Dataset& data, int64_t max_samples) {
  const int64_t n = data.size();
  const int64_t take = (max_samples > 0) ? std::min(max_samples, n) : n;
  const int64_t batch = std::max<int64_t>(config_.batch_size, 256);
  SoftmaxCrossEntropy loss_fn;
  Batch b;
  double loss_sum = 0;
  int64_t rows = 0, correct = 0;
  std::vector<int64_t> idx;
  for (int64_t start = 0; start < take; start += batch) {
    idx.clear();
    for (int64_t i = start; i < std::min(take, start + batch); ++i)
      idx.push_back(take == n ? i : i * n / take);  // evenly spaced when sub-sampling
    data.gather(idx, b);
    const Tensor& logits = model_.forward(b.input);
    const double l = loss_fn.forward(logits, b.targets);
    const auto r = static_cast<int64_t>(b.targets.size());
    loss_sum += l * static_cast<double>(r);
    rows += r;
    correct += count_correct(logits, b.targets);
  }
  EvalResult e;
  e.loss = rows ? loss_sum / static_cast<double>(rows) : 0.0;
  e.accuracy = rows ? static_cast<double>(correct) / static_cast<double>(rows) : 0.0;
  e.samples = take;
  return e;
}

TrainResult Trainer::run(const TrainerCallbacks& callbacks) {
  TrainResult result;
  result.losses.reserve(static_cast<size_t>(total_steps_));
  LrSchedule schedule(config_.schedule, base_lr_, total_steps_);
  SamplerOptions sopt;
  sopt.batch_size = config_.batch_size;
  sopt.seed = config_.seed;
  Sampler sampler(train_.size(), sopt);
  SoftmaxCrossEntropy loss_fn;
  Batch batch;
  Tensor dlogits;

  const int64_t eval_samples =
      config_.eval_batches > 0 ? config_.eval_batches * std::max<int64_t>(config_.batch_size, 256)
                               : 0;
  double best_eval = std::numeric_limits<double>::infinity();
  int64_t evals_without_gain = 0;

  auto run_eval = [&](int64_t step) {
    if (!eval_) return;
    Stopwatch sw;
    EvalResult e = evaluate(*eval_, eval_samples);
    result.eval_seconds += sw.seconds();
    e.step = step;
    result.evals.push_back(e);
    if (callbacks.on_eval) callbacks.on_eval(e);
    if (e.loss < best_eval - config_.early_stopping.min_delta) {
      best_eval = e.loss;
      evals_without_gain = 0;
    } else {
      ++evals_without_gain;
    }
  };

  const int64_t accumulation = config_.accumulation_steps;
  const auto micro_scale = static_cast<float>(1.0 / static_cast<double>(accumulation));
  double grad_norm = 0;

  double window_loss = 0;
  int64_t window_steps = 0, window_samples = 0, window_rows = 0;
  double window_seconds = 0;
  int64_t total_samples = 0, total_rows = 0;

  for (int64_t step = 0; step < total_steps_; ++step) {
    Stopwatch sw;
    const std::vector<int64_t> idx = sampler.next();
    model_.zero_grad();
    // Each micro-batch's loss is a mean over its rows; scaling its dlogits by 1/A makes the
    // summed gradients those of the mean over the whole batch.
    double loss_sum = 0;
    int64_t samples = 0, rows = 0;
    for (int64_t m = 0; m < accumulation; ++m) {
      if (accumulation == 1)
        train_.gather(idx, batch);
      else
        train_.gather(micro_batch(idx, accumulation, m), batch);
      const Tensor& logits = model_.forward(batch.input);
      const double micro_loss = loss_fn.forward(logits, batch.targets);
      SL_ENFORCE(std::isfinite(micro_loss),
                 "training diverged: loss is {} at step {} (try a lower optimizer.lr)", micro_loss,
                 step + 1);
      loss_sum += micro_loss;
      samples += batch.samples();
      rows += static_cast<int64_t>(batch.targets.size());
      loss_fn.backward(dlogits);
      if (accumulation > 1)
        for (float& g : dlogits.span()) g *= micro_scale;
      model_.backward(dlogits);
    }
    const double loss = loss_sum / static_cast<double>(accumulation);
    grad_norm = std::sqrt(squared_norm(model_.grads()));
    const double coef = clip_coefficient(grad_norm, config_.clip_grad_norm);
    if (coef < 1.0) {
      const auto c = static_cast<float>(coef);
      for (float& g : model_.grads()) g *= c;
    }
    const double lr = schedule.at(step);
    optimizer_.step(model_.params(), model_.grads(), lr);
    const double secs = sw.seconds();

    result.losses.push_back(loss);
    result.steps = step + 1;
    result.train_seconds += secs;
    total_samples += samples;
    total_rows += rows;
    window_loss += loss;
    window_seconds += secs;
    window_samples += samples;
    window_rows += rows;
    ++window_steps;

    const bool last = step + 1 == total_steps_;
    if (callbacks.on_log && ((step + 1) % config_.log_every == 0 || last)) {
      StepInfo info;
      info.step = step + 1;
      info.total_steps = total_steps_;
      info.epoch = sampler.epoch();
      info.loss = window_loss / static_cast<double>(window_steps);
      info.lr = lr;
      info.grad_norm = grad_norm;
      info.samples_per_second =
          window_seconds > 0 ? static_cast<double>(window_samples) / window_seconds : 0;
      info.tokens_per_second =
          window_seconds > 0 ? static_cast<double>(window_rows) / window_seconds : 0;
      callbacks.on_log(info);
      window_loss = window_seconds = 0;
      window_steps = window_samples = window_rows = 0;
    }
    if (!last && config_.eval_every > 0 && (step + 1) % config_.eval_every == 0) {
      run_eval(step + 1);
      const int64_t patience = config_.early_stopping.patience;
      if (patience > 0 && evals_without_gain >= patience) {
        result.stopped_early = true;
        result.stop_reason = fmt::format(
            "early stop at step {}: eval loss did not improve by more than {} in {} evaluations",
            step + 1, config_.early_stopping.min_delta, patience);
        break;
      }
    }
  }
  if (!result.stopped_early) result.stop_reason = fmt::format("completed {} steps", result.steps);
  // The final evaluation always reflects the returned parameters (unless it just ran).
  if (eval_ && (result.evals.empty() || result.evals.back().step != result.steps))
    run_eval(result.steps);
  if (result.train_seconds > 0) {
    result.samples_per_second = static_cast<double>(total_samples) / result.train_seconds;
    result.tokens_per_second = static_cast<double>(total_rows) / result.train_seconds;
  }
  result.params.assign(model_.params().begin(), model_.params().end());
  return result;
}

}  // namespace shardlab
