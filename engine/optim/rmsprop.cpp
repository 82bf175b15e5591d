#include "engine/optim/rmsprop.h"

#include "engine/core/error.h"
#include "engine/optim/update_args.h"
#include "engine/optim/validate.h"

namespace shardlab {

Rmsprop::Rmsprop(OptimizerConfig config) : Optimizer(std::move(config)) {
  SL_ENFORCE(config_.name == "rmsprop",
             "optimizer.name: Rmsprop cannot run '{}' (expected rmsprop)", config_.name);
  validate_optimizer_config(config_);
}

std::vector<std::pair<std::string, std::span<float>>> Rmsprop::state() {
  if (config_.momentum == 0.0) return {{"square_avg", square_avg_}};
  return {{"square_avg", square_avg_}, {"momentum_buffer", momentum_buf_}};
}

void Rmsprop::allocate_state(int64_t n) {
  square_avg_ = make_buffer(MemCategory::optimizer_state, static_cast<size_t>(n));
  momentum_buf_ = make_buffer(MemCategory::optimizer_state,
                              config_.momentum == 0.0 ? 0 : static_cast<size_t>(n));
}

void Rmsprop::update(std::span<float> params, std::span<const float> grads, double lr) {
  kernels::rmsprop_update(rmsprop_args(config_, params.data(), grads.data(),
                                       static_cast<int64_t>(params.size()), lr, square_avg_.data(),
                                       momentum_buf_.data()));
}

}  // namespace shardlab
