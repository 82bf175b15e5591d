// ParallelConfig: how a job is spread over ranks; the job file's "parallel" object.
//
//   "parallel": { "strategy": "zero2", "world_size": 4, "backend": "threads",
//                 "bucket_mb": 1, "overlap": true }
//
// strategy "none" is one process with the plain Trainer (world_size must be 1). Every other
// strategy runs world_size ranks, as threads of this process (backend "threads") or as processes
// under mpirun (backend "mpi"; `shardlab run` starts mpirun itself).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardlab {

struct ParallelConfig {
  std::string strategy = "none";    // none | ddp | zero1 | zero2 | fsdp
  int64_t world_size = 1;           // ranks; 1..kMaxWorldSize
  std::string backend = "threads";  // threads | mpi
  // Gradient bucket size in MiB (DDP and ZeRO-1 all-reduce, ZeRO-2 reduce-scatter and the ZeRO
  // parameter all-gather run one collective per bucket). In (0, 4096]; not used by "none" and
  // "fsdp" (which communicates per block).
  double bucket_mb = 4.0;
  // Launch each bucket's (DDP, ZeRO) or block's (FSDP) collective as soon as backward has produced
  // its gradients, and prefetch FSDP's next block; false runs every collective after backward
  // and gathers each block only when it is needed, to measure what overlap buys. Not used by
  // "none".
  bool overlap = true;
  // FSDP: keep each block's gathered parameters from its forward to its backward instead of
  // freeing them and gathering again (PyTorch's reshard_after_forward=False). More memory, less
  // communication. Must stay false for other strategies.
  bool fsdp_keep_params = false;
  // Bound on every collective wait, in seconds (a dead or stuck rank fails the job after this).
  // In (0, 86400]; not used by "none" (nor is backend).
  double timeout_s = 60.0;

  // --- 3D parallelism (pipeline x tensor x data; Topology, HybridShardedOptimizer) ---
  // With pp > 1 or tp > 1 the job runs the GPT model as HybridShardedOptimizer: tensor
  // parallelism inside each tp group, pipeline stages across pp, and `strategy` (ddp, zero1 or
  // zero2) across each dp group. pp * tp * dp must equal world_size.
  int64_t pp = 1;   // pipeline stages
  int64_t tp = 1;   // tensor-parallel ranks per group (must divide model.gpt.heads)
  int64_t dp = -1;  // data-parallel replicas; -1: world_size / (pp * tp)
  // Micro-batches per step (samples of each replica's batch split evenly); the pipeline's m.
  int64_t micro_batches = 1;
  std::string schedule = "1f1b";  // gpipe | 1f1b | interleaved (pipeline schedule, pp > 1)
  // Model chunks per stage (virtual stages, Megatron's virtual_pipeline_model_parallel_size):
  // >= 2 with schedule interleaved, where the model is cut into pp * pp_chunks virtual stages and
  // stage s runs s, pp + s, ...; 1 otherwise.
  int64_t pp_chunks = 1;
  std::string pp_partition = "uniform";  // uniform | balanced (blocks per stage, pp > 1)
};

// True when the job uses tensor or pipeline parallelism (HybridShardedOptimizer).
inline bool uses_model_parallelism(const ParallelConfig& p) {
  return p.pp > 1 || p.tp > 1;
}

inline constexpr int64_t kMaxWorldSize = 1024;
inline constexpr int64_t kMaxPipelineChunks = 64;

// "none", "ddp", "zero1", "zero2", "fsdp".
inline const std::vector<std::string>& strategy_names() {
  static const std::vector<std::string> names{"none", "ddp", "zero1", "zero2", "fsdp"};
  return names;
}

}  // namespace shardlab
