#include "engine/optim/sgd.h"

#include "engine/core/error.h"
#include "engine/optim/validate.h"
#include "kernels/cpu/sgd_update.h"

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
  kernels::SgdArgs a;
  a.param = params.data();
  a.grad = grads.data();
  a.momentum_buf = momentum_buf_.data();
  a.n = static_cast<int64_t>(params.size());
  a.lr = lr;
  a.momentum = config_.momentum;
  a.weight_decay = config_.weight_decay;
  a.nesterov = config_.nesterov;
  kernels::sgd_update(a);
}

}  // namespace shardlab
