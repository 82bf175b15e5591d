#include "engine/optim/update_args.h"

#include "engine/optim/registry.h"

namespace shardlab {

namespace {

// What every kernel takes alike: the arrays, their length, the rate and L2 weight decay.
template <class Args>
Args common_args(const OptimizerConfig& c, const UpdateBuffers& b) {
  Args a;
  a.param = b.param;
  a.grad = b.grad;
  a.n = b.n;
  a.lr = b.lr;
  a.weight_decay = c.weight_decay;
  return a;
}

}  // namespace

UpdateArgs sgd_args(const OptimizerConfig& c, const UpdateBuffers& b) {
  auto a = common_args<kernels::SgdArgs>(c, b);
  a.momentum_buf = b.state[0];
  a.momentum = c.momentum;
  a.nesterov = c.nesterov;
  return a;
}

UpdateArgs adam_args(const OptimizerConfig& c, const UpdateBuffers& b) {
  auto a = common_args<kernels::AdamArgs>(c, b);
  a.exp_avg = b.state[0];
  a.exp_avg_sq = b.state[1];
  a.beta1 = c.beta1;
  a.beta2 = c.beta2;
  a.eps = c.eps;
  a.decoupled = c.name == "adamw";
  a.step = b.step;
  return a;
}

UpdateArgs rmsprop_args(const OptimizerConfig& c, const UpdateBuffers& b) {
  auto a = common_args<kernels::RmspropArgs>(c, b);
  a.square_avg = b.state[0];
  a.momentum_buf = b.state[1];
  a.alpha = c.alpha;
  a.eps = c.eps;
  a.momentum = c.momentum;
  return a;
}

UpdateArgs adagrad_args(const OptimizerConfig& c, const UpdateBuffers& b) {
  auto a = common_args<kernels::AdagradArgs>(c, b);
  a.sum = b.state[0];
  a.eps = c.eps;
  return a;
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

void run_update(Device& device, const UpdateArgs& args) {
  std::visit(Overloaded{[&](const kernels::SgdArgs& a) { device.sgd_update(a); },
                        [&](const kernels::AdamArgs& a) { device.adam_update(a); },
                        [&](const kernels::RmspropArgs& a) { device.rmsprop_update(a); },
                        [&](const kernels::AdagradArgs& a) { device.adagrad_update(a); }},
             args);
}

}  // namespace shardlab
