// Memory planner: the bytes each rank should hold, by category, for a strategy, model, base
// optimizer and world size, from the ZeRO paper's formulas (Rajbhandari et al. 2019, section 5),
// in fp32 with k bytes of optimizer state per parameter (Adam: 8):
//
//   ddp    params 4 Psi        grads 4 Psi        state k Psi
//   zero1  params 4 Psi'       grads 4 Psi'       state k Psi'/N
//   zero2  params 4 Psi'       grads 4 Psi'/N     state k Psi'/N
//   fsdp   params 4 Psi''/N    grads 4 Psi''/N    state k Psi''/N
//
// Psi is the parameter count, Psi' = Psi rounded up to a multiple of N (the flat buffer's
// padding), Psi'' = the sum over blocks of each block rounded up to a multiple of N (FSDP pads
// every block). These are the steady-state figures, between steps, that the memory ledger
// measures; `peak` adds what is live during a step (ZeRO-2's full gradient buffer during backward;
// FSDP's gathered blocks and their gradients).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/memory.h"
#include "engine/core/param_layout.h"
#include "engine/model/model.h"  // model_layout
#include "engine/model/model_config.h"
#include "engine/optim/optimizer_config.h"
#include "engine/topology/parallel_config.h"

namespace shardlab {

struct MemoryPlan {
  MemoryFigures steady;       // params, grads, optimizer_state (activations and comm: 0)
  MemoryFigures peak;         // params, grads, optimizer_state at their most during a step
  int64_t params = 0;         // Psi
  int64_t padded_params = 0;  // Psi' or Psi'' (Psi for ddp)
  int64_t shard = 0;          // elements each rank updates
  int state_floats = 0;       // optimizer state floats per parameter
  std::string formula;        // e.g. "zero2: 4*Psi' + 4*Psi'/N + 8*Psi'/N"
};

// Optimizer state floats per parameter for a base optimizer (Adam 2, SGD with momentum 1, ...):
// the optimizer registry's state_floats_per_param, as the plan's int.
int optimizer_state_floats(const OptimizerConfig& config);

// The plan for one rank of `world` ranks. strategy "none" plans one process (like ddp, N = 1).
MemoryPlan plan_memory(const ParamLayout& layout, const OptimizerConfig& optimizer,
                       const ParallelConfig& parallel, int world);

// The plan for world rank `rank` of a pp x tp x dp job (HybridShardedOptimizer): the formulas
// above applied to the parameters that rank holds (its stage's blocks, tp-sliced) with
// N = dp and parallel.strategy as the data-parallel strategy. The figures differ by stage and,
// with an uneven vocabulary split, by tp rank. Throws InvalidArgument for a layout that does not
// resolve.
MemoryPlan plan_memory_hybrid(const ModelConfig& model, const OptimizerConfig& optimizer,
                              const ParallelConfig& parallel, int world, int rank);

// Every rank's plan for a job, as the app's memory view and the web dashboard draw it: one rank
// for strategy "none", else parallel.world_size ranks; with tensor or pipeline parallelism each
// rank by plan_memory_hybrid (computed once per (pp, tp) coordinate: ranks differing only in dp
// hold the same slice), otherwise every rank alike by plan_memory. `formula` is rank 0's.
// Throws what the planners throw (InvalidArgument for a layout that does not resolve).
struct JobMemoryPlan {
  std::vector<MemoryFigures> steady;  // by world rank
  std::string formula;
};
JobMemoryPlan plan_job_memory(const ModelConfig& model, const OptimizerConfig& optimizer,
                              const ParallelConfig& parallel);

}  // namespace shardlab
