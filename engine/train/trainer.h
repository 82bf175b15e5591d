// Trainer: the single-process training loop. Samples a batch, runs forward, loss and backward
// (over train.accumulation_steps micro-batches whose gradients add up), clips the gradients by
// their global norm when train.clip_grad_norm is set, steps the base optimizer over the whole flat
// parameter buffer at the scheduled learning rate, evaluates on held-out data, and stops after N
// steps/epochs, early when the evaluation loss stops improving, or between steps when
// TrainerCallbacks::should_stop asks. Sharded strategies reuse the same pieces with their own
// step.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/model/model.h"
#include "engine/optim/optimizer.h"
#include "engine/train/train_config.h"

namespace shardlab {

struct StepInfo {
  int64_t step = 0;  // 1-based: the number of optimizer steps done
  int64_t total_steps = 0;
  int64_t epoch = 0;
  double loss = 0;                // mean training loss over the steps since the last progress line
  double lr = 0;                  // learning rate of this step
  double grad_norm = 0;           // global gradient norm of this step, before clipping
  double samples_per_second = 0;  // over the steps since the last progress line, training only
  double tokens_per_second = 0;   // target rows per second (= samples/s for classifiers)
  double step_seconds = 0;        // on_step: this step's time (0 in on_log)
};

struct EvalResult {
  int64_t step = 0;
  double loss = 0;
  double accuracy = 0;  // fraction of output rows whose argmax is the target
  int64_t samples = 0;
};

struct TrainResult {
  std::vector<double> losses;  // training loss of every step
  // Every evaluation, the final one last. A run stopped by should_stop (or paused) has no final
  // evaluation: the last may be older than `steps`, or there may be none.
  std::vector<EvalResult> evals;
  int64_t steps = 0;
  bool stopped_early = false;
  std::string stop_reason;         // why the run ended
  double train_seconds = 0;        // forward, backward and update, excluding evaluation
  double median_step_seconds = 0;  // the median of this run's steps (this rank's)
  double eval_seconds = 0;
  double samples_per_second = 0;
  double tokens_per_second = 0;
  std::vector<float> params;  // the final parameters (a copy of the model's flat buffer)
  const EvalResult& final_eval() const { return evals.back(); }  // evals must not be empty
};

struct TrainerCallbacks {
  std::function<void(const StepInfo&)> on_log;  // every train.log_every steps and at the end
  // After every step, with that step's own figures (its loss, time and throughput).
  std::function<void(const StepInfo&)> on_step;
  std::function<void(const EvalResult&)> on_eval;  // after each evaluation
  // Before every step, with the number of steps done. True stops the run there: no further step
  // and no final evaluation (the run is not complete); the result says stopped_early with
  // "stopped at the user's request after N steps". In a sharded job every rank asks, so every
  // rank's answer must agree for the same steps_done (a StopRequest's should_stop does:
  // engine/train/stop_request.h). Null: never stop.
  std::function<bool(int64_t steps_done)> should_stop;
  // The single-process Trainer only (not the sharded strategies, not the GPU trainer): called with
  // each step's sample indices before they are read; it may reorder them. The step's gradient is
  // the mean over the same samples whatever their order, so this is the same computation added in
  // another order (engine/job/equivalence.h reverses them to measure a noise floor). Null: as
  // sampled.
  std::function<void(std::vector<int64_t>& indices)> reorder_batch;
};

// What every trainer (this one, the GPU one) needs of train.* against the training set —
// batch_size >= 1, accumulation_steps >= 1 dividing it, a batch no larger than the data — and the
// run's length in optimizer steps (train.steps, else train.epochs full passes). Throws
// InvalidArgument naming the field.
int64_t checked_total_steps(const TrainConfig& config, const Dataset& train);

struct LoopSpec;  // training_loop.h
class Sampler;    // engine/data/sampler.h

// The loop of a whole run as every one-process trainer (this one, the GPU one) wires it: `config`
// and its schedule from `base_lr`, all of `total_steps` from the first, the data epoch of
// `sampler` (which must outlive the loop). The caller adds step and, with held-out data, evaluate.
LoopSpec whole_run_loop(const TrainConfig& config, double base_lr, int64_t total_steps,
                        const Sampler& sampler);

class Trainer {
 public:
  // eval may be null (no evaluation; early stopping then needs none). The optimizer is attached
  // to the model's whole flat buffer here. Throws InvalidArgument unless
  // train.accumulation_steps >= 1 divides train.batch_size.
  Trainer(Model& model, Optimizer& optimizer, const Dataset& train, const Dataset* eval,
          const TrainConfig& config, double base_lr);

  int64_t total_steps() const { return total_steps_; }
  TrainResult run(const TrainerCallbacks& callbacks = {});
  // Mean loss and accuracy over `max_samples` evenly spaced samples of `data` (0: all of them),
  // in deterministic order, without touching gradients.
  EvalResult evaluate(const Dataset& data, int64_t max_samples);

 private:
  Model& model_;
  Optimizer& optimizer_;
  const Dataset& train_;
  const Dataset* eval_;
  TrainConfig config_;
  double base_lr_;
  int64_t total_steps_ = 0;
};

}  // namespace shardlab
