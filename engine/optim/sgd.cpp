#include "engine/optim/sgd.h"

#include "engine/core/error.h"
#include "engine/optim/update_args.h"
#include "engine/optim/validate.h"

namespace shardlab {

Sgd::Sgd(OptimizerConfig config) : Optimizer(std::move(config)) {
  SL_ENFORCE(config_.name == "sgd", "optimizer.name: Sgd cannot run '{}' (expected sgd)",
             config_.name);
  validate_optimizer_config(config_);
}

std::vector<std::pair<std::string, std::span<float>>> Sgd::state() {
  if (config_.momentum == 0.0) return {};
  return {{"momentum_buffer", momentum_buf_}};
}

void Sgd::allocate_state(int64_t n) {
  // Zeroed so that the first step's buf = momentum * 0 + g is exactly PyTorch's buf = g.
  momentum_buf_ = make_buffer(MemCategory::optimizer_state,
                              config_.momentum == 0.0 ? 0 : static_cast<size_t>(n));
}

void Sgd::update(std::span<float> params, std::span<const float> grads, double lr) {
  kernels::sgd_update(sgd_args(config_, params.data(), grads.data(),
                               static_cast<int64_t>(params.size()), lr, momentum_buf_.data()));
}

}  // namespace shardlab
