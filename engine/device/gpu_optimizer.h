// GpuOptimizer: the base optimizers of engine/optim (SGD with momentum and Nesterov, Adam, AdamW,
// RMSprop, Adagrad) over a flat device range, through the fused kernels/cuda updates: the same
// hyper-parameters and validation (make_optimizer's), the same host-computed coefficients and
// step counting, the same named state arrays, held in device memory (the ledger's
// optimizer_state).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/device/cuda_context.h"
#include "engine/device/cuda_buffer.h"
#include "engine/optim/optimizer_config.h"

namespace shardlab {

class GpuOptimizer {
 public:
  // State for n elements, zeroed (Adagrad: its initial accumulator). Throws InvalidArgument for an
  // unknown optimizer or a bad hyper-parameter, with make_optimizer's messages.
  GpuOptimizer(const OptimizerConfig& config, int64_t n, CudaContext& ctx);

  const OptimizerConfig& config() const { return config_; }
  int64_t size() const { return n_; }
  // One update of n device floats at learning rate lr (schedule applied), enqueued on the
  // context's stream. The step count advances first (Adam's bias correction sees 1 on the first).
  void step(float* params, const float* grads, double lr);
  int64_t steps() const { return steps_; }
  // The named state arrays ("exp_avg", "exp_avg_sq", "momentum_buffer", "square_avg", "sum"), as
  // engine/optim's state() names them, copied to the host (waits, bounded).
  std::vector<std::pair<std::string, std::vector<float>>> download_state() const;
  int64_t state_bytes() const;

 private:
  OptimizerConfig config_;
  int64_t n_ = 0;
  CudaContext& ctx_;
  int64_t steps_ = 0;
  std::vector<std::pair<std::string, CudaBuffer<float>>> state_;
};

}  // namespace shardlab
