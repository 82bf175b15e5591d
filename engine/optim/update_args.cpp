#include "engine/optim/update_args.h"

#include "engine/optim/registry.h"

namespace shardlab {

UpdateArgs sgd_args(const OptimizerConfig& c, const UpdateBuffers& b) {
  return kernels::SgdArgs{.param = b.param,
                          .grad = b.grad,
                          .momentum_buf = b.state[0],
                          .n = b.n,
                          .lr = b.lr,
                          .momentum = c.momentum,
                          .weight_decay = c.weight_decay,
                          .nesterov = c.nesterov};
}

UpdateArgs adam_args(const OptimizerConfig& c, const UpdateBuffers& b) {
  return kernels::AdamArgs{.param = b.param,
                           .grad = b.grad,
                           .exp_avg = b.state[0],
                           .exp_avg_sq = b.state[1],
                           .n = b.n,
                           .lr = b.lr,
                           .beta1 = c.beta1,
                           .beta2 = c.beta2,
                           .eps = c.eps,
                           .weight_decay = c.weight_decay,
                           .decoupled = c.name == "adamw",
                           .step = b.step};
}

UpdateArgs rmsprop_args(const OptimizerConfig& c, const UpdateBuffers& b) {
  return kernels::RmspropArgs{.param = b.param,
                              .grad = b.grad,
                              .square_avg = b.state[0],
                              .momentum_buf = b.state[1],
                              .n = b.n,
                              .lr = b.lr,
                              .alpha = c.alpha,
                              .eps = c.eps,
                              .momentum = c.momentum,
                              .weight_decay = c.weight_decay};
}

UpdateArgs adagrad_args(const OptimizerConfig& c, const UpdateBuffers& b) {
  return kernels::AdagradArgs{.param = b.param,
                              .grad = b.grad,
                              .sum = b.state[0],
                              .n = b.n,
                              .lr = b.lr,
                              .eps = c.eps,
                              .weight_decay = c.weight_decay};
}

UpdateArgs update_args(const OptimizerConfig& config, const UpdateBuffers& b) {
  return optimizer_spec(config).args(config, b);
}

void run_cpu_update(const UpdateArgs& args) {
  std::visit(Overloaded{[](const kernels::SgdArgs& a) { kernels::sgd_update(a); },
                        [](const kernels::AdamArgs& a) { kernels::adam_update(a); },
                        [](const kernels::RmspropArgs& a) { kernels::rmsprop_update(a); },
                        [](const kernels::AdagradArgs& a) { kernels::adagrad_update(a); }},
             args);
}

}  // namespace shardlab
