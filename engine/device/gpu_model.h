// GpuModel: the MLP or GPT model of a ModelConfig on one GPU, with the CPU Model's exact
// ParamLayout (engine/model/model.h): its flat device parameter and gradient buffers are
// element-for-element the CPU model's, so parameters move between the two with one copy and model
// files, checkpoints and equivalence checks need no translation.
//
// The layers run the kernels of kernels/cuda (GEMMs through cuBLAS) on the context's stream, in
// the same order and with the same rounding choices as the CPU layers (engine/model), so a GPU
// run follows the CPU run within rounding. Activations live in DeviceBuffers (counted by the
// ledger under activations; parameters under params, gradients under grads) and are reused from
// step to step.
//
//   CudaContext gpu(0);
//   auto cpu = build_model(config);                // initialised on the host from config.seed
//   GpuModel model(config, cpu->params(), gpu);    // same parameters, on the device
//   model.zero_grad();
//   const float loss = model.forward_loss(batch);  // mean loss over the batch's target rows
//   model.backward();                              // gradients ADDED into model.grads()
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/core/param_layout.h"
#include "engine/data/batch.h"
#include "engine/device/cuda_context.h"
#include "engine/model/model_config.h"

namespace shardlab {

class GpuModel {
 public:
  // config must be complete (the data's sizes filled in: complete_model_config). host_params:
  // num_params() floats in the layout's order, e.g. a CPU Model's after init(). Throws
  // InvalidArgument for a bad config (as build_model) or a size mismatch, DeviceError when the
  // device runs out of memory.
  GpuModel(const ModelConfig& config, std::span<const float> host_params, CudaContext& ctx);
  ~GpuModel();
  GpuModel(const GpuModel&) = delete;
  GpuModel& operator=(const GpuModel&) = delete;

  const ModelConfig& config() const;
  const ParamLayout& layout() const;
  int64_t num_params() const;
  CudaContext& context() const;
  // The flat device buffers, num_params() floats each.
  float* params();
  const float* params() const;
  float* grads();
  const float* grads() const;

  // Zeroes grads() (enqueued on the stream).
  void zero_grad();

  // Uploads batch.input and batch.targets, runs the forward pass and the softmax cross-entropy.
  // Inputs are checked on the host first, with the CPU layers' messages (token ids in
  // [0, vocab), targets in [0, classes), shapes; InvalidArgument). Returns the mean loss over the
  // target rows as the CPU's SoftmaxCrossEntropy::forward computes it (row losses summed in double
  // in row order, divided by rows, as float) and, when `correct` is not null, the number of rows
  // whose first maximal logit is the target. Waits (bounded) for the device to read the losses.
  float forward_loss(const Batch& batch, int64_t* correct = nullptr);

  // Back-propagates the mean loss of the last forward_loss: dlogits = softmax backward with
  // 1/rows, then multiplied by `scale` when it is not 1 (1/micro-batches, as run_micro_batches
  // does), through every layer, ADDING into grads(). Enqueued; does not wait.
  void backward(float scale = 1.0f);

  // Parameters to or from the host (num_params() floats); download waits (bounded).
  std::vector<float> download_params() const;
  void upload_params(std::span<const float> host_params);
  std::vector<float> download_grads() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardlab
