// Training-run options; the job file's "schedule" and "train" objects map onto these.
#pragma once

#include <cstdint>
#include <string>

namespace shardlab {

struct ScheduleConfig {
  std::string kind = "constant";  // "constant" | "warmup_cosine"
  int64_t warmup_steps = 0;       // warmup_cosine: linear ramp from lr/warmup to lr
  double min_lr_ratio = 0.0;      // warmup_cosine: the cosine ends at lr * min_lr_ratio
};

struct EarlyStoppingConfig {
  int64_t patience = 0;    // evaluations without improvement before stopping (0: never stop early)
  double min_delta = 0.0;  // an eval loss must beat the best by more than this to count
};

// train.threads: more than any machine here has cores.
inline constexpr int64_t kMaxThreads = 1024;

struct TrainConfig {
  int64_t steps = 0;   // optimizer steps; 0 means use epochs
  int64_t epochs = 0;  // passes over the training set when steps is 0
  int64_t batch_size = 64;
  int64_t eval_every = 0;    // steps between evaluations (0: only at the end)
  int64_t eval_batches = 0;  // batches per evaluation (0: the whole evaluation set)
  int64_t log_every = 50;    // steps between progress lines
  uint64_t seed = 1;         // data order
  // Micro-steps per optimizer step: each (rank's share of the) batch is cut by samples into this
  // many micro-batches whose gradients are summed before the update (averaged over all of them).
  int64_t accumulation_steps = 1;
  // Clip by the global gradient norm (over all parameters, across all shards) to at most this
  // value before the update, as torch.nn.utils.clip_grad_norm_; 0 disables clipping.
  double clip_grad_norm = 0.0;
  // Sharded checkpoints (engine/checkpoint/checkpoint_store.h) of a sharded job: every rank's
  // training state under checkpoint_dir ("": none) after every checkpoint_every steps (0: none
  // along the way) and always after the run's last step; the newest keep_checkpoints (>= 1)
  // complete ones are kept. Strategy "none" does not save checkpoints.
  std::string checkpoint_dir;
  // A model file (engine/model/model_file.h: --save-model, `shardlab checkpoint consolidate`;
  // ShardLab's own format or a .safetensors file) to start from instead of the seeded
  // initialisation ("": none); ignored when resuming from a checkpoint, which holds the parameters
  // itself.
  std::string init_model;
  int64_t checkpoint_every = 0;
  int64_t keep_checkpoints = 3;
  // Threads each rank computes on (BLAS); 0: this machine's cores divided among the ranks that
  // share them (engine/launch/compute_threads.h). 1 by default: OpenBLAS on more threads sums
  // some GEMMs in another order, so results would depend on the machine's cores (the same bits
  // on every run of one count, not across counts).
  int64_t threads = 1;  // at most kMaxThreads
  ScheduleConfig schedule;
  EarlyStoppingConfig early_stopping;
};

}  // namespace shardlab
