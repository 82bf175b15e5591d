#include "engine/optim/adam.h"

#include "engine/core/error.h"
#include "engine/optim/update_args.h"
#include "engine/optim/validate.h"

namespace shardlab {

Adam::Adam(OptimizerConfig config) : Optimizer(std::move(config)) {
  SL_ENFORCE(config_.name == "adam" || config_.name == "adamw",
             "optimizer.name: Adam cannot run '{}' (expected adam/adamw)", config_.name);
  validate_optimizer_config(config_);
}

std::vector<std::pair<std::string, std::span<float>>> Adam::state() {
  return {{"exp_avg", exp_avg_}, {"exp_avg_sq", exp_avg_sq_}};
}

void Adam::allocate_state(int64_t n) {
  exp_avg_ = make_buffer(MemCategory::optimizer_state, static_cast<size_t>(n));
  exp_avg_sq_ = make_buffer(MemCategory::optimizer_state, static_cast<size_t>(n));
}

void Adam::update(std::span<float> params, std::span<const float> grads, double lr) {
  kernels::adam_update(adam_args(config_, params.data(), grads.data(),
                                 static_cast<int64_t>(params.size()), lr, steps(), exp_avg_.data(),
                                 exp_avg_sq_.data()));
}

}  // namespace shardlab
