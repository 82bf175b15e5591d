// The fused update kernels' arguments for one step under an OptimizerConfig: how each base
// optimizer's hyper-parameters map onto kernels/cpu/*_update.h, written once for the CPU
// optimizers (engine/optim), whose kernels on any device take the same Args, and `bench optimizer
// --device cuda` (engine/device/cuda_update.h). Pointers are host or device alike. Which mapping an optimizer uses is its
// registry entry's (registry.h).
#pragma once

#include <cstdint>
#include <span>
#include <variant>

#include "engine/device/device.h"
#include "engine/optim/optimizer_config.h"
#include "kernels/cpu/adagrad_update.h"
#include "kernels/cpu/adam_update.h"
#include "kernels/cpu/rmsprop_update.h"
#include "kernels/cpu/sgd_update.h"

namespace shardlab {

// One update's arguments, for whichever kernel the optimizer runs.
using UpdateArgs =
    std::variant<kernels::SgdArgs, kernels::AdamArgs, kernels::RmspropArgs, kernels::AdagradArgs>;

// What one update works on: n parameters and gradients, this step's rate (schedule applied), the
// 1-based step count, and the optimizer's state arrays in its registry order (null for one it does
// not keep under this config, e.g. a momentum buffer with momentum 0).
struct UpdateBuffers {
  float* param = nullptr;
  const float* grad = nullptr;
  int64_t n = 0;
  double lr = 0.0;
  int64_t step = 1;
  std::span<float* const> state;
};

// The mappings, one per kernel (state: sgd [momentum_buffer]; adam [exp_avg, exp_avg_sq], AdamW's
// decoupled decay when config.name is "adamw"; rmsprop [square_avg, momentum_buffer]; adagrad
// [sum]).
UpdateArgs sgd_args(const OptimizerConfig& config, const UpdateBuffers& b);
UpdateArgs adam_args(const OptimizerConfig& config, const UpdateBuffers& b);
UpdateArgs rmsprop_args(const OptimizerConfig& config, const UpdateBuffers& b);
UpdateArgs adagrad_args(const OptimizerConfig& config, const UpdateBuffers& b);

// The arguments config's optimizer passes its kernel (through its registry entry).
UpdateArgs update_args(const OptimizerConfig& config, const UpdateBuffers& b);
// Runs the CPU kernel the arguments are for.
void run_cpu_update(const UpdateArgs& args);
// Queues the kernel the arguments are for on `device` (its pointers are addresses there).
void run_update(Device& device, const UpdateArgs& args);

// For std::visit over UpdateArgs with one lambda per kernel.
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};

}  // namespace shardlab
