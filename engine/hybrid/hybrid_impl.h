// HybridShardedOptimizer's internals, shared by hybrid_optimizer.cpp (set-up, evaluation, model
// files), hybrid_step.cpp (one pipelined step) and hybrid_state.cpp (serialisation).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/data/batch.h"
#include "engine/data/sampler.h"
#include "engine/hybrid/dp_sync.h"
#include "engine/hybrid/hybrid_optimizer.h"
#include "engine/hybrid/pipeline_schedule.h"
#include "engine/hybrid/pipeline_stage.h"
#include "engine/hybrid/tensor_parallel_grad_sync.h"
#include "engine/tensor_parallel/vocab_cross_entropy.h"
#include "engine/train/training_loop.h"

namespace shardlab {

// Point-to-point tags between neighbouring stages.
inline constexpr int kActivationTag = 1;  // stage s -> s + 1, training forward
inline constexpr int kGradientTag = 2;    // stage s + 1 -> s, training backward
inline constexpr int kEvalTag = 3;        // stage s -> s + 1, evaluation forward
// The tag of a message of kind `tag` into model chunk `chunk` of the receiving stage: each chunk
// has its own stream between two stages (with interleaving and p = 2, stage 1 sends stage 0 both
// chunk 0's and chunk 1's inputs), so the order of chunks never decides which message is matched.
// Chunk 0's tags are the plain ones.
inline constexpr int pipeline_tag(int tag, int chunk) {
  return tag + 4 * chunk;
}

struct HybridShardedOptimizer::Impl {
  Topology::Groups groups;
  TpGroup tp;
  Coord coord;
  std::unique_ptr<PipelineSchedule> schedule;
  std::vector<PipelineOp> ops;  // this stage's, in order
  std::unique_ptr<PipelineStage> stage;
  std::unique_ptr<TensorParallelGradSync> tp_sync;
  std::unique_ptr<DataParallelSync> dp_sync;
  IndexRange vocab;                   // the logit columns this tp rank holds (last stage)
  int64_t width = 0, vocab_size = 0;  // model.gpt.width and vocab_size

  // Per activation slot: the stage input it received, its loss (last stage), the shape of its
  // output, and its sends still in flight.
  std::vector<Tensor> inputs;
  std::vector<VocabParallelCrossEntropy> losses;
  std::vector<Shape> out_shapes;
  std::vector<WorkHandle> act_sends, grad_sends;
  Tensor grad_in, dlogits;
  // Phase events: the optimizer's telemetry_ during the step (may be null).
  telemetry::TelemetrySink* telemetry = nullptr;
  std::chrono::microseconds slowdown{0};  // OptimizeInput's (a rank slowed on purpose)
  int world_rank = 0;
  Batch batch;

  // After a failed pipelined step the stage's slots may still be the source or target of sends
  // and receives that never completed: the handles are dropped (bounded) and the optimizer
  // refuses further steps and evaluations.
  std::string failure;
  void fail(const std::string& why) {
    act_sends.assign(act_sends.size(), nullptr);
    grad_sends.assign(grad_sends.size(), nullptr);
    failure = why;
  }
  void check_usable() const {
    SL_ENFORCE(failure.empty(),
               "HybridShardedOptimizer: an earlier step failed ({}); build a new optimizer (or "
               "resume from a checkpoint) to continue",
               failure);
  }

  struct PipelineOutcome {
    double loss = 0;   // mean over micro-batches of their mean loss (last stage; 0 elsewhere)
    int64_t rows = 0;  // target rows seen (last stage)
    double busy = 0, idle = 0;
  };
  // Runs this stage's ops for one step over the replica's `indices`; gradients add into the
  // stage's buffer.
  PipelineOutcome run_pipeline(const Dataset& data, const std::vector<int64_t>& indices,
                               int64_t micro_batches);
};

}  // namespace shardlab
