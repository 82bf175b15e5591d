// RMSprop, not centred, with optional momentum and L2 weight decay; torch.optim.RMSprop
// semantics.
#pragma once

#include <vector>

#include "engine/core/memory.h"
#include "engine/optim/optimizer.h"

namespace shardlab {

class Rmsprop : public Optimizer {
 public:
  explicit Rmsprop(OptimizerConfig config);
  // "square_avg", plus "momentum_buffer" when momentum > 0.
  std::vector<std::pair<std::string, std::span<float>>> state() override;

 protected:
  void allocate_state(int64_t n) override;
  void update(std::span<float> params, std::span<const float> grads, double lr) override;

 private:
  Buffer square_avg_;
  Buffer momentum_buf_;
};

}  // namespace shardlab
