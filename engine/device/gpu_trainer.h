// GpuTrainer: Trainer (engine/train/trainer.h) with every step on a GPU: the same loop
// (run_training_loop: schedule, progress lines, evaluation, early stopping, callbacks), the same
// sampler and micro-batches, gradient clipping by the global norm (kernels/cuda sq_norm), and the
// fused optimizer update on device buffers. The host copies only the batch in and the losses out.
//
// Data parallel over NCCL: given a Communicator of the nccl backend (engine/comm/nccl), rank r of
// W takes its contiguous share of every global batch (then cut into micro-batches) as the CPU DDP
// strategy does, and after
// backward the gradients are all-reduced (sum, then 1/W) on the communicator's own stream, which
// waits for the compute stream with an event (NcclCommunicator::set_compute_stream); the optimizer
// update is queued after it the same way. Every rank then holds the same parameters.
#pragma once

#include <cstdint>

#include "engine/comm/communicator.h"
#include "engine/data/dataset.h"
#include "engine/device/gpu_model.h"
#include "engine/device/gpu_optimizer.h"
#include "engine/train/train_config.h"
#include "engine/train/trainer.h"

namespace shardlab {

class GpuTrainer {
 public:
  // As Trainer's constructor (checked_total_steps: InvalidArgument for accumulation_steps that
  // does not divide batch_size, a batch larger than the data). data_parallel: null for one GPU,
  // else an nccl communicator on the model's GPU, with batch_size divisible by its size x
  // accumulation_steps.
  GpuTrainer(GpuModel& model, GpuOptimizer& optimizer, const Dataset& train, const Dataset* eval,
             const TrainConfig& config, double base_lr, Communicator* data_parallel = nullptr);

  int64_t total_steps() const { return total_steps_; }
  // As Trainer::run; result.params is the final parameters, downloaded.
  TrainResult run(const TrainerCallbacks& callbacks = {});
  // As Trainer::evaluate (one process: every sample; data parallel: each rank its share, summed).
  EvalResult evaluate(const Dataset& data, int64_t max_samples);

 private:
  GpuModel& model_;
  GpuOptimizer& optimizer_;
  const Dataset& train_;
  const Dataset* eval_;
  TrainConfig config_;
  double base_lr_;
  Communicator* dp_;
  int64_t total_steps_ = 0;
};

}  // namespace shardlab
