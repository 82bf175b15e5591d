// Base-optimizer options; the job file's "optimizer" object maps onto this. Which optimizer reads
// which field, and each field's range, is in registry.cpp; validation rejects a field set where it
// has no meaning.
#pragma once

#include <string>

namespace shardlab {

struct OptimizerConfig {
  std::string name = "adam";  // a registry entry: optimizer_names()
  double lr = 1e-3;           // the schedule scales it per step
  double weight_decay = 0.0;  // L2 added to the gradient; adamw: decoupled decay
  double momentum = 0.0;
  bool nesterov = false;  // needs momentum > 0
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double alpha = 0.99;  // smoothing constant of RMSprop's squared-gradient average
  double initial_accumulator = 0.0;
};

}  // namespace shardlab
