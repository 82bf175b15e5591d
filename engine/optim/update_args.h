// The fused update kernels' arguments for one step under an OptimizerConfig: how each base
// optimizer's hyper-parameters map onto kernels/cpu/*_update.h, written once for the CPU
// optimizers (engine/optim) and the GPU one (engine/device/gpu_optimizer.h), whose kernels take
// the same Args. Pointers are host or device alike; lr is this step's rate (schedule applied).
#pragma once

#include <cstdint>

#include "engine/optim/optimizer_config.h"
#include "kernels/cpu/adagrad_update.h"
#include "kernels/cpu/adam_update.h"
#include "kernels/cpu/rmsprop_update.h"
#include "kernels/cpu/sgd_update.h"

namespace shardlab {

// momentum_buf: n floats, or null when config.momentum is 0.
kernels::SgdArgs sgd_args(const OptimizerConfig& config, float* param, const float* grad, int64_t n,
                          double lr, float* momentum_buf);
// AdamW's decoupled decay when config.name is "adamw"; step: the 1-based step count.
kernels::AdamArgs adam_args(const OptimizerConfig& config, float* param, const float* grad,
                            int64_t n, double lr, int64_t step, float* exp_avg, float* exp_avg_sq);
// momentum_buf: n floats, or null when config.momentum is 0.
kernels::RmspropArgs rmsprop_args(const OptimizerConfig& config, float* param, const float* grad,
                                  int64_t n, double lr, float* square_avg, float* momentum_buf);
kernels::AdagradArgs adagrad_args(const OptimizerConfig& config, float* param, const float* grad,
                                  int64_t n, double lr, float* sum);

}  // namespace shardlab
