// SGD with optional (Nesterov) momentum and L2 weight decay; torch.optim.SGD semantics with
// dampening 0. Plain SGD (momentum 0) keeps no state.
#pragma once

#include <vector>

#include "engine/core/memory.h"
#include "engine/optim/optimizer.h"

namespace shardlab {

class Sgd : public Optimizer {
 public:
  explicit Sgd(OptimizerConfig config);
  // "momentum_buffer" when momentum > 0, nothing otherwise.
  std::vector<std::pair<std::string, std::span<float>>> state() override;

 protected:
  void allocate_state(int64_t n) override;
  void update(std::span<float> params, std::span<const float> grads, double lr) override;

 private:
  Buffer momentum_buf_;
};

}  // namespace shardlab
