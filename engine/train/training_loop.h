// The training loop shared by the single-process Trainer and every ShardedOptimizer: the
// schedule, progress windows, periodic evaluation, early stopping and the run's result. Only the
// step itself differs (one process, or a rank of a sharded job), so it is a callback; so are the
// forward/backward passes over a step's micro-batches, shared through run_micro_batches().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/data/batch.h"
#include "engine/data/dataset.h"
#include "engine/model/model.h"
#include "engine/telemetry/events.h"
#include "engine/train/train_config.h"
#include "engine/train/trainer.h"

namespace shardlab {

// What one optimizer step did.
struct StepOutcome {
  double loss = 0;       // mean loss of the step's batch (over all ranks)
  double grad_norm = 0;  // global gradient norm before clipping
  int64_t samples = 0;   // samples in the step (global batch)
  int64_t rows = 0;      // target rows (tokens for the GPT model)
};

// Early-stopping bookkeeping; the caller keeps it so a run can pause and resume.
struct EarlyStopState {
  double best = 0;           // best evaluation loss so far (valid once seen > 0)
  int64_t without_gain = 0;  // evaluations since the best one
  int64_t seen = 0;          // evaluations so far
  bool stop = false;         // patience ran out
};

struct LoopSpec {
  const TrainConfig* config = nullptr;
  double base_lr = 0;
  int64_t total_steps = 0;  // the whole run (the schedule's length)
  int64_t first_step = 0;   // steps already done (0-based index of the next one)
  int64_t stop_at = 0;      // run until this many steps are done (<= total_steps)
  // Runs optimizer step `step` (0-based) at learning rate `lr`.
  std::function<StepOutcome(int64_t step, double lr)> step;
  // Evaluates the current parameters over `max_samples` (0: all); null: no evaluation.
  std::function<EvalResult(int64_t max_samples)> evaluate;
  // The data epoch of the last batch.
  std::function<int64_t()> epoch;
  // Called after each step once its progress line and evaluation are done, with the steps done so
  // far; `last` is true for the last step this run does (stop_at reached or early stopping
  // fired), and after a stop at the user's request it is called once more with the steps done
  // and last = true (unless no step ran). Where a sharded job saves its checkpoints; may be null.
  std::function<void(int64_t done, bool last)> after_step;
};

// Runs steps first_step .. stop_at-1, logging through callbacks.on_log every train.log_every
// steps and at the end, evaluating every train.eval_every steps and, when the run is complete,
// once more at the end, stopping early per train.early_stopping. Before every step it asks
// callbacks.should_stop (when set); true ends the run there with stopped_early and "stopped at
// the user's request after N steps", a last progress line for the steps not yet logged, and no
// final evaluation. `result.params` is left empty.
TrainResult run_training_loop(const LoopSpec& spec, EarlyStopState& early,
                              const TrainerCallbacks& callbacks);

// How `parts` evaluators (1 for one process; ranks or replicas otherwise) share an evaluation of
// max_samples evenly spaced samples (0: all) of a data set of n, in rounds of at most `batch`.
// Part p takes a contiguous share (the first take % parts shares hold one more); every part runs
// the same number of rounds (the longest share's), so collectives inside a round stay matched.
struct EvalShare {
  int64_t n = 0, take = 0, batch = 0, rounds = 0;
  int64_t begin = 0, end = 0;  // this part's share of [0, take)
  // The data-set indices of round k; empty once this part's share is used up.
  void round(int64_t k, std::vector<int64_t>& idx) const;
};
EvalShare eval_share(int64_t n, int64_t max_samples, int64_t batch, int parts, int part);

// Mean loss and accuracy from summed loss * rows, rows and correct rows.
EvalResult eval_result(double loss_sum, double rows, double correct, int64_t samples);

// One part's evaluation figures before they are combined: summed loss * rows, rows, correct rows.
struct EvalSums {
  double loss_sum = 0;
  int64_t rows = 0, correct = 0;
};
// Scores one gathered batch: its mean loss, with its correct rows in `correct`.
using BatchScorer = std::function<double(const Batch& batch, int64_t& correct)>;
// Gathers and scores every round of `share` from `data`, stopping once the share is used up. For
// trainers with no collective inside a round (a sharded evaluation must run every round).
EvalSums sum_eval_rounds(const EvalShare& share, const Dataset& data, const BatchScorer& score);

struct MicroBatchOutcome {
  double loss = 0;  // mean of the micro-batches' mean losses
  int64_t samples = 0;
  int64_t rows = 0;
};

// What a sharding strategy hooks into run_micro_batches (all optional).
struct MicroBatchHooks {
  BlockHooks* blocks = nullptr;          // around every block's forward and backward
  std::function<void(int64_t m)> begin;  // before micro-batch m's forward
  std::function<void(int64_t m)> end;    // after micro-batch m's backward
  // After micro-batch m's forward (its loss included) and after its backward (before `end`), with
  // the span's start and end in telemetry::now_seconds() (epoch seconds): the strategy's phase
  // telemetry. Null: no clock is read.
  std::function<void(telemetry::Phase phase, int64_t m, double start, double end)> phase;
  // Throw at once when a loss is not finite; a sharded step turns it off and checks the combined
  // loss instead, so that every rank stops together.
  bool check_finite = true;
  // Time added to each forward, inside its phase: a rank slowed on purpose
  // (OptimizeInput::slowdown).
  std::chrono::microseconds slowdown{0};
};

// Forward and backward over `indices` cut into `count` micro-batches (micro_batch()), each
// micro-batch's dlogits scaled by 1/count so the accumulated gradients are those of the mean over
// all of them. Throws when a loss is not finite ("training diverged: loss is nan at step N").
MicroBatchOutcome run_micro_batches(Model& model, const Dataset& data,
                                    const std::vector<int64_t>& indices, int64_t count,
                                    int64_t step, Batch& batch, Tensor& dlogits,
                                    const MicroBatchHooks& hooks = {});

}  // namespace shardlab
