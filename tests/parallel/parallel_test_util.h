// Shared pieces of the sharded-optimizer suites: the jobs they train, the single-process reference
// they compare against (build_training + Trainer, never the code under test), and comparisons.
#pragma once

#ifdef QT_CORE_LIB
#include <QString>
#include <nlohmann/json.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/threads/world.h"
#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/data/datasets.h"
#include "engine/data/sampler.h"
#include "engine/job/build.h"
#include "engine/job/equivalence.h"
#include "engine/job/job_spec.h"
#include "engine/model/cross_entropy.h"
#include "engine/model/model.h"
#include "engine/strategies/sharded_optimizer.h"
#include "engine/topology/parallel_config.h"
#include "engine/train/trainer.h"
#include "tests/common/data.h"

namespace shardlab::ptest {

using test::have_fashion_mnist;
using test::kFashionDir;
using test::kNoFashionMnist;

// The MLP of the suites: 784 -> 13 -> 10, 10,345 parameters, a count that 2, 3, 4 and 8 do not
// divide (checked by the suites), so every sharded layout needs padding.
inline constexpr int64_t kHidden = 13;
inline constexpr int64_t kMlpParams = 784 * kHidden + kHidden + kHidden * 10 + 10;

// Fashion-MNIST, 120 training images (5 batches of 24: 10 steps cross an epoch boundary) and 300
// evaluation images, of which one evaluation takes 256 evenly spaced ones.
inline DataConfig mlp_data() {
  DataConfig d;
  d.dataset = "fashion-mnist";
  d.path = kFashionDir;
  d.train_limit = 120;
  d.eval_limit = 300;
  return d;
}

inline OptimizerConfig optimizer_config(const std::string& name) {
  OptimizerConfig o;
  o.name = name;
  if (name == "sgd") {
    o.lr = 0.05;
    o.momentum = 0.9;
  } else if (name == "adam") {
    o.lr = 1e-3;
  } else if (name == "adamw") {
    o.lr = 1e-3;
    o.weight_decay = 0.01;
  } else if (name == "rmsprop") {
    o.lr = 1e-3;
  } else if (name == "adagrad") {
    o.lr = 1e-2;
  }
  return o;
}

// The MLP job: batch 24, 10 steps, one small evaluation at the end.
inline JobSpec mlp_job(const std::string& strategy, int world, const std::string& optimizer) {
  JobSpec j;
  j.name = "ptest-mlp";
  j.model.kind = "mlp";
  j.model.seed = 7;
  j.model.mlp.input_dim = 784;
  j.model.mlp.hidden = {kHidden};
  j.model.mlp.num_classes = 10;
  j.data = mlp_data();
  j.optimizer = optimizer_config(optimizer);
  j.train.steps = 10;
  j.train.batch_size = 24;
  j.train.log_every = 5;
  j.train.eval_every = 0;
  j.train.eval_batches = 1;
  j.train.seed = 3;
  j.parallel.strategy = strategy;
  j.parallel.world_size = world;
  j.parallel.backend = "threads";
  return j;
}

// The character corpus (fortunes, or the shipped fallback) for the tiny GPT.
inline DataConfig gpt_data() {
  DataConfig d;
  d.dataset = "chars";
  d.train_limit = 600;
  d.eval_limit = 300;
  return d;
}

// Tiny GPT: context 8, width 16, 2 layers, 2 heads; batch 12 (divisible by 2 and 3), Adam.
// vocab_size is the corpus's (as build_training would fill it in).
inline JobSpec gpt_job(const std::string& strategy, int world, int64_t vocab) {
  JobSpec j;
  j.name = "ptest-gpt";
  j.model.kind = "gpt";
  j.model.seed = 5;
  j.model.gpt.vocab_size = vocab;
  j.model.gpt.context = 8;
  j.model.gpt.width = 16;
  j.model.gpt.layers = 2;
  j.model.gpt.heads = 2;
  j.model.gpt.mlp_ratio = 4;
  j.data = gpt_data();
  j.optimizer = optimizer_config("adam");
  j.optimizer.lr = 3e-3;
  j.train.steps = 10;
  j.train.batch_size = 12;
  j.train.log_every = 5;
  j.train.eval_every = 0;
  j.train.eval_batches = 1;
  j.train.seed = 11;
  j.parallel.strategy = strategy;
  j.parallel.world_size = world;
  j.parallel.backend = "threads";
  return j;
}

// A job's pipeline x tensor x data layout (ParallelConfig's pp, tp, dp, micro_batches, schedule),
// written as one designated initializer so a suite's job reads as its layout.
struct GridLayout {
  int64_t pp = 1;
  int64_t tp = 1;
  int64_t dp = -1;  // -1: world_size / (pp * tp)
  int64_t micro_batches = 1;
  std::string schedule = "1f1b";
};

inline void set_grid(JobSpec& j, const GridLayout& g) {
  j.parallel.pp = g.pp;
  j.parallel.tp = g.tp;
  j.parallel.dp = g.dp;
  j.parallel.micro_batches = g.micro_batches;
  j.parallel.schedule = g.schedule;
}

// Makes the state a resumed or synchronized run must carry non-trivial: a warm-up cosine
// schedule (the step count matters) and evaluations every 3 steps with a patience that never
// fires (the early-stopping counters are live state).
inline void make_state_live(JobSpec& j) {
  j.train.schedule.kind = "warmup_cosine";
  j.train.schedule.warmup_steps = 3;
  j.train.schedule.min_lr_ratio = 0.1;
  j.train.eval_every = 3;
  j.train.early_stopping.patience = 50;
}

// The suites' data, loaded once per process: Fashion-MNIST as mlp_job reads it, the character
// corpus as gpt_job reads it (which data a job reads does not depend on its strategy or world).
inline const Datasets& mnist_data() {
  static const Datasets data = load_job_data(mlp_job("zero2", 4, "adam"));
  return data;
}

inline const Datasets& corpus_data() {
  static const Datasets data = load_job_data(gpt_job("ddp", 1, 0));
  return data;
}

// The data a job of either model reads.
inline const Datasets& data_of(const JobSpec& job) {
  return job.model.kind == "gpt" ? corpus_data() : mnist_data();
}

// The tiny GPT's vocabulary on the corpus: gpt_job's `vocab` argument.
inline int64_t corpus_vocab() {
  static const int64_t vocab = [] {
    JobSpec probe = gpt_job("ddp", 1, 0);
    complete_model_config(probe.model, corpus_data());
    return probe.model.gpt.vocab_size;
  }();
  return vocab;
}

// The same job as one process (engine/job/equivalence.h single_process_job).
inline JobSpec single_process(const JobSpec& job) {
  return single_process_job(job);
}

// A cache key for a single-process job: its full JSON, and the fields the suites vary spelled
// out too, so the key never depends on the schema writing them.
inline std::string cache_key(const JobSpec& single) {
  char extra[96];
  std::snprintf(extra, sizeof extra, "|acc=%lld|clip=%.17g",
                static_cast<long long>(single.train.accumulation_steps),
                single.train.clip_grad_norm);
  return job_to_json(single).dump() + extra;
}

// The single-process reference of `job`: build_training(job as one process) + Trainer::run.
// Cached by the job's full JSON (so the same configuration is trained once per suite).
inline const TrainResult& reference(const JobSpec& job) {
  static std::map<std::string, std::unique_ptr<TrainResult>> cache;
  const JobSpec single = single_process(job);
  const std::string key = cache_key(single);
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;
  TrainingSetup setup = build_training(single);
  auto r = std::make_unique<TrainResult>(run_training(setup));
  return *cache.emplace(key, std::move(r)).first->second;
}

// What a sharded run of `job` is compared with: the single-process run (build_training + Trainer,
// never the code under test) with every step's gradient norm, and the tolerances measured on the
// job itself (engine/job/equivalence.h: the same job in one process with its batch cut into
// micro-batches or reversed sets the noise floor). Cached by cache_key and the cuts.
struct Judged {
  RunFigures reference;
  NoiseFloor floor;
  Tolerances tol;
};
inline const Judged& judged(const JobSpec& job) {
  static std::map<std::string, std::unique_ptr<Judged>> cache;
  const JobSpec single = single_process_job(job);
  // The cuts depend on the layout, so the key holds them too.
  std::string key = cache_key(single) + "|cuts";
  for (int64_t c : reordering_cuts(job)) {
    key += ' ';
    key += std::to_string(c);
  }
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;
  auto j = std::make_unique<Judged>();
  const SingleRunner runner = [](TrainingSetup& s, const TrainerCallbacks& cb) {
    return run_training(s, cb);
  };
  j->reference = run_figures(single, runner);
  j->floor = measure_noise_floor(job, j->reference, runner);
  j->tol = equivalence_tolerances(j->floor, j->reference.result.steps);
  return *cache.emplace(key, std::move(j)).first->second;
}

// The loss gradient of the initial model on the first global batch of `job` (drawn from `data`,
// which must be the job's data), computed directly from the model and the sampler: the pre-clip
// gradient of step 1 of any run of the job, whatever its accumulation (micro-batches of equal
// size average to this).
inline std::vector<float> first_step_grads(const JobSpec& job, const Datasets& data) {
  std::unique_ptr<Model> model = build_model(job.model);
  SamplerOptions so;
  so.batch_size = job.train.batch_size;
  so.seed = job.train.seed;
  Sampler sampler(data.train->size(), so);
  Batch b;
  data.train->gather(sampler.next(), b);
  model->zero_grad();
  SoftmaxCrossEntropy loss;
  loss.forward(model->forward(b.input), b.targets);
  Tensor d;
  loss.backward(d);
  model->backward(d);
  return {model->grads().begin(), model->grads().end()};
}

// Its global L2 norm.
inline double first_step_grad_norm(const JobSpec& job, const Datasets& data) {
  double sq = 0;
  for (float g : first_step_grads(job, data)) sq += static_cast<double>(g) * g;
  return std::sqrt(sq);
}

// max |a - b| / max |b| over all elements (engine/job/equivalence.h's max_rel_diff); infinity
// when the sizes differ, an element is NaN, or there is nothing to compare.
inline double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (b.empty()) return std::numeric_limits<double>::infinity();
  return max_rel_diff(a, b);
}

// Bitwise equality of two float arrays (distinguishes -0 from 0, compares NaN payloads).
inline bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Index of the first element where a and b differ bitwise, or -1.
inline int64_t first_bit_difference(const std::vector<float>& a, const std::vector<float>& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<int64_t>(i);
  }
  return a.size() == b.size() ? -1 : static_cast<int64_t>(n);
}

inline CommOptions test_comm_options() {
  CommOptions o;
  o.timeout = std::chrono::seconds(60);
  return o;
}

// fn(communicator, state) on `n` ranks run as threads, each rank with its own MemoryLedger in
// scope and its own State; the states, by rank, once every rank has finished (assertions then run
// on the caller's thread).
template <typename State, typename F>
std::vector<State> on_thread_ranks(int n, F&& fn) {
  std::vector<State> states(static_cast<size_t>(n));
  run_threads(n, test_comm_options(), [&](Communicator& c) {
    MemoryLedger ledger;
    LedgerScope scope(&ledger);
    fn(c, states[static_cast<size_t>(c.rank())]);
  });
  return states;
}

#ifdef QT_CORE_LIB  // the Qt Test suites (tst_sharded_mpi is a plain main without Qt)
inline QString qs(const std::string& s) {
  return QString::fromStdString(s);
}
#endif

}  // namespace shardlab::ptest
