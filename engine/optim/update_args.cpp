#include "engine/optim/update_args.h"

namespace shardlab {

kernels::SgdArgs sgd_args(const OptimizerConfig& config, float* param, const float* grad, int64_t n,
                          double lr, float* momentum_buf) {
  kernels::SgdArgs a;
  a.param = param;
  a.grad = grad;
  a.momentum_buf = momentum_buf;
  a.n = n;
  a.lr = lr;
  a.momentum = config.momentum;
  a.weight_decay = config.weight_decay;
  a.nesterov = config.nesterov;
  return a;
}

kernels::AdamArgs adam_args(const OptimizerConfig& config, float* param, const float* grad,
                            int64_t n, double lr, int64_t step, float* exp_avg, float* exp_avg_sq) {
  kernels::AdamArgs a;
  a.param = param;
  a.grad = grad;
  a.exp_avg = exp_avg;
  a.exp_avg_sq = exp_avg_sq;
  a.n = n;
  a.lr = lr;
  a.beta1 = config.beta1;
  a.beta2 = config.beta2;
  a.eps = config.eps;
  a.weight_decay = config.weight_decay;
  a.decoupled = config.name == "adamw";
  a.step = step;
  return a;
}

kernels::RmspropArgs rmsprop_args(const OptimizerConfig& config, float* param, const float* grad,
                                  int64_t n, double lr, float* square_avg, float* momentum_buf) {
  kernels::RmspropArgs a;
  a.param = param;
  a.grad = grad;
  a.square_avg = square_avg;
  a.momentum_buf = momentum_buf;
  a.n = n;
  a.lr = lr;
  a.alpha = config.alpha;
  a.eps = config.eps;
  a.momentum = config.momentum;
  a.weight_decay = config.weight_decay;
  return a;
}

kernels::AdagradArgs adagrad_args(const OptimizerConfig& config, float* param, const float* grad,
                                  int64_t n, double lr, float* sum) {
  kernels::AdagradArgs a;
  a.param = param;
  a.grad = grad;
  a.sum = sum;
  a.n = n;
  a.lr = lr;
  a.eps = config.eps;
  a.weight_decay = config.weight_decay;
  return a;
}

}  // namespace shardlab
