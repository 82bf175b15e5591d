// Adam (L2 weight decay on the gradient) and AdamW (decoupled decay, config.name "adamw");
// torch.optim.Adam / AdamW semantics without amsgrad.
#pragma once

#include <vector>

#include "engine/core/memory.h"
#include "engine/optim/optimizer.h"

namespace shardlab {

class Adam : public Optimizer {
 public:
  // config.name chooses the variant: "adam" or "adamw".
  explicit Adam(OptimizerConfig config);
  // "exp_avg" (first moment) and "exp_avg_sq" (second moment).
  std::vector<std::pair<std::string, std::span<float>>> state() override;

 protected:
  void allocate_state(int64_t n) override;
  void update(std::span<float> params, std::span<const float> grads, double lr) override;

 private:
  Buffer exp_avg_;
  Buffer exp_avg_sq_;
};

}  // namespace shardlab
