#include "engine/optim/adam.h"

#include "engine/core/error.h"
#include "engine/optim/validate.h"
#include "kernels/cpu/adam_update.h"

namespace shardlab {

Adam::Adam(OptimizerConfig config)
    : Optimizer(std::move(config)), decoupled_(config_.name == "adamw") {
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
  kernels::AdamArgs a;
  a.param = params.data();
  a.grad = grads.data();
  a.exp_avg = exp_avg_.data();
  a.exp_avg_sq = exp_avg_sq_.data();
  a.n = static_cast<int64_t>(params.size());
  a.lr = lr;
  a.beta1 = config_.beta1;
  a.beta2 = config_.beta2;
  a.eps = config_.eps;
  a.weight_decay = config_.weight_decay;
  a.decoupled = decoupled_;
  a.step = steps();
  kernels::adam_update(a);
}

}  // namespace shardlab
