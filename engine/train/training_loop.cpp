#include "engine/train/training_loop.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/core/timer.h"
#include "engine/model/cross_entropy.h"
#include "engine/train/lr_schedule.h"
#include "engine/train/slowdown.h"
#include "engine/train/step_math.h"

namespace shardlab {

TrainResult run_training_loop(const LoopSpec& spec, EarlyStopState& early,
                              const TrainerCallbacks& callbacks) {
  SL_ENFORCE_T(InternalError, spec.config && spec.step && spec.epoch, "training loop: incomplete");
  const TrainConfig& t = *spec.config;
  TrainResult result;
  result.losses.reserve(static_cast<size_t>(std::max<int64_t>(0, spec.stop_at - spec.first_step)));
  std::vector<double> step_times;  // for the median
  step_times.reserve(result.losses.capacity());
  const LrSchedule schedule(t.schedule, spec.base_lr, spec.total_steps);
  const int64_t eval_samples =
      t.eval_batches > 0 ? t.eval_batches * std::max<int64_t>(t.batch_size, 256) : 0;

  auto run_eval = [&](int64_t at) {
    if (!spec.evaluate) return;
    Stopwatch sw;
    EvalResult e = spec.evaluate(eval_samples);
    result.eval_seconds += sw.seconds();
    e.step = at;
    result.evals.push_back(e);
    if (callbacks.on_eval) callbacks.on_eval(e);
    if (early.seen == 0 || e.loss < early.best - t.early_stopping.min_delta) {
      early.best = e.loss;
      early.without_gain = 0;
    } else {
      ++early.without_gain;
    }
    ++early.seen;
    if (t.early_stopping.patience > 0 && early.without_gain >= t.early_stopping.patience)
      early.stop = true;
  };

  double window_loss = 0, window_seconds = 0;
  int64_t window_steps = 0, window_samples = 0, window_rows = 0;
  int64_t total_samples = 0, total_rows = 0;
  double last_lr = 0, last_grad_norm = 0;
  int64_t done = spec.first_step;
  // One progress line over the steps since the previous one (none when there are none).
  auto log_window = [&] {
    if (!callbacks.on_log || window_steps == 0) return;
    StepInfo info;
    info.step = done;
    info.total_steps = spec.total_steps;
    info.epoch = spec.epoch();
    info.loss = window_loss / static_cast<double>(window_steps);
    info.lr = last_lr;
    info.grad_norm = last_grad_norm;
    if (window_seconds > 0) {
      info.samples_per_second = static_cast<double>(window_samples) / window_seconds;
      info.tokens_per_second = static_cast<double>(window_rows) / window_seconds;
    }
    callbacks.on_log(info);
    window_loss = window_seconds = 0;
    window_steps = window_samples = window_rows = 0;
  };
  bool user_stop = false;
  while (done < spec.stop_at && !early.stop) {
    // Asked before every step with the same `done` on every rank, so a sharded job's ranks all
    // stop at the same point when their answers agree (StopRequest).
    if (callbacks.should_stop && callbacks.should_stop(done)) {
      user_stop = true;
      break;
    }
    const double lr = schedule.at(done);
    Stopwatch sw;
    const StepOutcome s = spec.step(done, lr);
    const double secs = sw.seconds();
    ++done;
    result.losses.push_back(s.loss);
    result.train_seconds += secs;
    step_times.push_back(secs);
    total_samples += s.samples;
    total_rows += s.rows;
    window_loss += s.loss;
    window_seconds += secs;
    window_samples += s.samples;
    window_rows += s.rows;
    ++window_steps;
    last_lr = lr;
    last_grad_norm = s.grad_norm;
    const bool last = done == spec.total_steps;
    if (callbacks.on_step) {
      StepInfo info;
      info.step = done;
      info.total_steps = spec.total_steps;
      info.epoch = spec.epoch();
      info.loss = s.loss;
      info.lr = lr;
      info.grad_norm = s.grad_norm;
      info.step_seconds = secs;
      if (secs > 0) {
        info.samples_per_second = static_cast<double>(s.samples) / secs;
        info.tokens_per_second = static_cast<double>(s.rows) / secs;
      }
      callbacks.on_step(info);
    }
    if (done % t.log_every == 0 || last || done == spec.stop_at) log_window();
    if (!last && t.eval_every > 0 && done % t.eval_every == 0) {
      run_eval(done);
      if (early.stop) {
        result.stopped_early = true;
        result.stop_reason = fmt::format(
            "early stop at step {}: eval loss did not improve by more than {} in {} evaluations",
            done, t.early_stopping.min_delta, t.early_stopping.patience);
      }
    }
    if (spec.after_step) spec.after_step(done, done == spec.stop_at || early.stop);
  }
  result.steps = done;
  if (!step_times.empty()) {
    const auto mid = step_times.begin() + static_cast<std::ptrdiff_t>(step_times.size() / 2);
    std::nth_element(step_times.begin(), mid, step_times.end());
    result.median_step_seconds = *mid;
  }
  if (user_stop && spec.after_step && done > spec.first_step) spec.after_step(done, true);
  if (user_stop) {
    // The steps since the last progress line still get their end-of-run line.
    log_window();
    result.stopped_early = true;
    result.stop_reason = fmt::format("stopped at the user's request after {} steps", done);
  }
  const bool finished = !user_stop && (done == spec.total_steps || early.stop);
  if (!result.stopped_early)
    result.stop_reason = finished
                             ? fmt::format("completed {} steps", done)
                             : fmt::format("paused after step {} of {}", done, spec.total_steps);
  // The final evaluation always reflects the returned parameters (unless it just ran).
  if (finished && spec.evaluate && (result.evals.empty() || result.evals.back().step != done))
    run_eval(done);
  if (result.train_seconds > 0) {
    result.samples_per_second = static_cast<double>(total_samples) / result.train_seconds;
    result.tokens_per_second = static_cast<double>(total_rows) / result.train_seconds;
  }
  return result;
}

MicroBatchOutcome run_micro_batches(Model& model, const Dataset& data,
                                    const std::vector<int64_t>& indices, int64_t count,
                                    int64_t step, Batch& batch, Tensor& dlogits,
                                    const MicroBatchHooks& hooks) {
  SoftmaxCrossEntropy loss_fn;
  MicroBatchOutcome out;
  double loss_sum = 0;
  const auto scale = static_cast<float>(1.0 / static_cast<double>(count));
  for (int64_t m = 0; m < count; ++m) {
    if (hooks.begin) hooks.begin(m);
    if (count == 1)
      data.gather(indices, batch);
    else
      data.gather(micro_batch(indices, count, m), batch);
    const bool timed = static_cast<bool>(hooks.phase);
    double start = timed ? telemetry::now_seconds() : 0.0;
    const Tensor& logits = model.forward(batch.input, hooks.blocks);
    const double loss = loss_fn.forward(logits, batch.targets);
    slow_down(hooks.slowdown);
    if (timed) {
      hooks.phase(telemetry::Phase::forward, m, start, telemetry::now_seconds());
      start = telemetry::now_seconds();
    }
    SL_ENFORCE(!hooks.check_finite || std::isfinite(loss),
               "training diverged: loss is {} at step {} (try a lower optimizer.lr)", loss,
               step + 1);
    loss_sum += loss;
    out.samples += batch.samples();
    out.rows += static_cast<int64_t>(batch.targets.size());
    loss_fn.backward(dlogits);
    // Each micro-batch's loss is a mean over its rows; scaling by 1/count makes the summed
    // gradients those of the mean over the whole batch.
    if (count > 1) dlogits.device().scale(dlogits.dev(), dlogits.numel(), scale);
    model.backward(dlogits, hooks.blocks);
    if (timed) hooks.phase(telemetry::Phase::backward, m, start, telemetry::now_seconds());
    if (hooks.end) hooks.end(m);
  }
  out.loss = loss_sum / static_cast<double>(count);
  return out;
}

EvalShare eval_share(int64_t n, int64_t max_samples, int64_t batch, int parts, int part) {
  SL_ENFORCE(batch >= 1 && parts >= 1 && part >= 0 && part < parts,
             "eval_share: batch {} parts {} part {}", batch, parts, part);
  EvalShare e;
  e.n = n;
  e.take = (max_samples > 0) ? std::min(max_samples, n) : n;
  e.batch = batch;
  const int64_t base = e.take / parts, extra = e.take % parts;
  e.begin = part * base + std::min<int64_t>(part, extra);
  e.end = e.begin + base + (part < extra ? 1 : 0);
  const int64_t longest = base + (extra > 0 ? 1 : 0);
  e.rounds = (longest + batch - 1) / batch;
  return e;
}

void EvalShare::round(int64_t k, std::vector<int64_t>& idx) const {
  idx.clear();
  for (int64_t i = begin + k * batch; i < std::min(end, begin + (k + 1) * batch); ++i)
    idx.push_back(take == n ? i : i * n / take);  // evenly spaced when sub-sampling
}

EvalSums sum_eval_rounds(const EvalShare& share, const Dataset& data, const BatchScorer& score) {
  EvalSums sums;
  Batch b;
  std::vector<int64_t> idx;
  for (int64_t k = 0; k < share.rounds; ++k) {
    share.round(k, idx);
    if (idx.empty()) break;
    data.gather(idx, b);
    int64_t c = 0;
    const double l = score(b, c);
    const auto r = static_cast<int64_t>(b.targets.size());
    sums.loss_sum += l * static_cast<double>(r);
    sums.rows += r;
    sums.correct += c;
  }
  return sums;
}

EvalResult eval_result(double loss_sum, double rows, double correct, int64_t samples) {
  EvalResult e;
  e.loss = rows > 0 ? loss_sum / rows : 0.0;
  e.accuracy = rows > 0 ? correct / rows : 0.0;
  e.samples = samples;
  return e;
}

}  // namespace shardlab
