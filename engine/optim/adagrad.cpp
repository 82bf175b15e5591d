#include "engine/optim/adagrad.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/optim/update_args.h"
#include "engine/optim/validate.h"

namespace shardlab {

Adagrad::Adagrad(OptimizerConfig config) : Optimizer(std::move(config)) {
  SL_ENFORCE(config_.name == "adagrad",
             "optimizer.name: Adagrad cannot run '{}' (expected adagrad)", config_.name);
  validate_optimizer_config(config_);
}

std::vector<std::pair<std::string, std::span<float>>> Adagrad::state() {
  return {{"sum", sum_}};
}

void Adagrad::allocate_state(int64_t n) {
  sum_ = make_buffer(MemCategory::optimizer_state, static_cast<size_t>(n));
  std::fill(sum_.begin(), sum_.end(), static_cast<float>(config_.initial_accumulator));
}

void Adagrad::update(std::span<float> params, std::span<const float> grads, double lr) {
  kernels::adagrad_update(adagrad_args(config_, params.data(), grads.data(),
                                       static_cast<int64_t>(params.size()), lr, sum_.data()));
}

}  // namespace shardlab
