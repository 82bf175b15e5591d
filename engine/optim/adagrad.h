// Adagrad with L2 weight decay and an initial accumulator value; torch.optim.Adagrad semantics
// with lr_decay 0 (a schedule belongs to the trainer's lr, not here).
#pragma once

#include <vector>

#include "engine/core/memory.h"
#include "engine/optim/optimizer.h"

namespace shardlab {

class Adagrad : public Optimizer {
 public:
  explicit Adagrad(OptimizerConfig config);
  // "sum": accumulated squared gradients, starting at config.initial_accumulator.
  std::vector<std::pair<std::string, std::span<float>>> state() override;

 protected:
  void allocate_state(int64_t n) override;
  void update(std::span<float> params, std::span<const float> grads, double lr) override;

 private:
  Buffer sum_;
};

}  // namespace shardlab
