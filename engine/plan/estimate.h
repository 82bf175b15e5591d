// One layout of a large GPT job, estimated: memory per GPU on each pipeline stage by category and
// the step time from parts a person can read. The formulas and their sources:
//   model states  ZeRO's stages (model_states.h) in mixed precision: bf16 parameters, bf16
//                 gradients (fp32 with PlanJob::fp32_grads, as Megatron accumulates them; with
//                 zero 1 that is Megatron's distributed optimizer), fp32 master weights and Adam
//                 moments (12 bytes per parameter); on each stage its layers (tp-sliced), the
//                 token and position embeddings on the first, the tied output head's copy on the
//                 last.
//   activations   Korthikanti et al. 2022 table 2 per layer (transformer.h); under 1F1B stage i
//                 holds min(m, p - i) micro-batches, interleaving multiplies that by
//                 (1 + (p-1)/(p v)); plus the first stage's embedding output, the last stage's
//                 fp32 logits of one micro-batch, and with full recomputation one layer's full
//                 activations while it is recomputed.
//   comm          tensor-parallel all-reduce buffers (2 of s b h bf16), pipeline send and receive
//                 buffers, ZeRO-3's two prefetched layers.
//   compute       FLOPs (transformer.h) over peak x matmul_efficiency, plus the elementwise work
//                 (layer norms, softmax, dropout, GeLU) as memory traffic over HBM bandwidth: each
//                 layer's activations written forward, read and their gradients written backward,
//                 written again when recomputed.
//   tp            per layer and micro-batch 4 all-reduces of s b h bf16 (2 forward, 2 backward; 6
//                 with full recomputation), ring alpha-beta on NVLink (tp within a node).
//   pp            a forward and a backward send per micro-batch and stage (s b h / t bf16,
//                 Megatron's scatter-gather), across nodes when tp x dp fills a node (ranks are
//                 ordered tp, dp, pp as Megatron orders them); interleaving sends v times as often.
//   bubble        (p - 1)/v micro-batch times of the slowest stage (Narayanan eq.: (p-1)/(v m)).
//   dp            gradient all-reduce of the stage's parameters (ZeRO 1-2: reduce-scatter of the
//                 gradients and all-gather of the bf16 parameters; ZeRO 3 gathers twice), on
//                 InfiniBand when tp x dp spans nodes; with overlap, up to one micro-batch's
//                 backward hides it.
//   optimizer     Adam reads and writes 26 bytes of state and weights and reads the gradient,
//                 per parameter it updates, at HBM bandwidth.
// Left out (said in the output): the CUDA context and allocator fragmentation beyond
// ClusterSpec::usable_memory_share, kernel launch gaps, stragglers, data loading, checkpoints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/plan/hardware.h"
#include "engine/plan/transformer.h"

namespace shardlab::plan {

struct Layout {
  int pp = 1, tp = 1, dp = 1;
  int64_t micro_batch = 1;
  int zero = 0;  // 0 (ddp) .. 3
  Recompute recompute = Recompute::none;
  bool sequence_parallel = false;
  int interleave = 1;  // v model chunks per pipeline stage
};

struct PlanJob {
  GptShape model;
  int64_t gpus = 0;
  int64_t global_batch = 0;  // sequences per step
  bool fp32_grads = false;
  bool dp_overlap = true;  // reduce gradients during the last micro-batch's backward
};

struct MemoryBreakdown {  // bytes per GPU
  double params = 0, grads = 0, optimizer_state = 0, activations = 0, comm = 0;
  double total() const { return params + grads + optimizer_state + activations + comm; }
};

struct TimeBreakdown {  // seconds per step; they add up to the step
  double compute = 0, tp = 0, pp = 0, dp = 0, bubble = 0, optimizer = 0;
  double total() const { return compute + tp + pp + dp + bubble + optimizer; }
};

struct Estimate {
  Layout layout;
  int64_t micro_batches = 0;            // m: per data-parallel replica and step
  std::vector<MemoryBreakdown> stages;  // by pipeline stage
  int fullest_stage = 0;
  MemoryBreakdown memory;   // the fullest stage's
  double usable_bytes = 0;  // HBM x usable_memory_share
  bool fits = false;
  TimeBreakdown time;
  double step_seconds = 0;
  double tflops_per_gpu = 0;     // model FLOPs (no recomputation)
  double hw_tflops_per_gpu = 0;  // what the GPUs execute (Narayanan's table 1 counts these)
  double mfu = 0;
};

// Why `layout` cannot run `job` ("" when it can): sizes that do not divide (tp into heads,
// hidden, ffn; pp x v into layers; dp x micro-batch into the batch), pp x tp x dp other than the
// GPUs, ZeRO 2-3 with a pipeline, interleaving without one or with m not a multiple of pp,
// sequence parallelism without tp.
std::string layout_problem(const PlanJob& job, const ClusterSpec& cluster, const Layout& layout);
// InvalidArgument (layout_problem's text) when the layout cannot run.
Estimate estimate(const PlanJob& job, const ClusterSpec& cluster, const Layout& layout);

// What the estimate leaves out, one sentence (printed under every plan table).
const char* left_out_text();

}  // namespace shardlab::plan
