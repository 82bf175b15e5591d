// The model states one data-parallel rank holds (parameters, gradients, optimizer state) under
// ZeRO's stages, from Rajbhandari et al. 2019 ("ZeRO: Memory Optimizations Toward Training
// Trillion Parameter Models"), section 5 and figure 1:
//
//   stage 0 (ddp)   params w_p Psi    grads w_g Psi    state w_s Psi
//   stage 1         params w_p Psi    grads w_g Psi    state w_s Psi/N
//   stage 2         params w_p Psi    grads w_g Psi/N  state w_s Psi/N
//   stage 3 (fsdp)  params w_p Psi/N  grads w_g Psi/N  state w_s Psi/N
//
// w_p, w_g, w_s are bytes per element: 4, 4, 4k for ShardLab's fp32 training with k state floats
// per parameter (Adam: k = 2); 2, 2, 12 for the paper's mixed-precision Adam (its K = 12: fp32
// master weights and two moments), and 2, 4, 12 for Megatron's distributed optimizer, which
// accumulates gradients in fp32 (stage 1 with w_g = 4). The one source of these formulas: the
// engine's memory planner (engine/plan/memory/planner.h), checked against the memory ledger of every
// rank, and the large-job planner (engine/plan/estimate.h) call it.
#pragma once

#include <cstdint>

namespace shardlab::plan {

struct StateWidths {
  int64_t param = 4;  // bytes per parameter element
  int64_t grad = 4;   // bytes per gradient element
  int64_t state = 8;  // optimizer state bytes per parameter
};

struct ModelStateBytes {
  int64_t params = 0;
  int64_t grads = 0;
  int64_t optimizer_state = 0;
  int64_t total() const { return params + grads + optimizer_state; }
};

// `full`: the elements of the whole replica (padded where the sharding pads: Psi'), `shard`: the
// elements one of N ranks owns (full / N). Stage 0 ignores `shard`.
constexpr ModelStateBytes zero_model_states(int stage, int64_t full, int64_t shard, StateWidths w) {
  ModelStateBytes b;
  b.params = w.param * (stage >= 3 ? shard : full);
  b.grads = w.grad * (stage >= 2 ? shard : full);
  b.optimizer_state = w.state * (stage >= 1 ? shard : full);
  return b;
}

}  // namespace shardlab::plan
