// Base-optimizer options; the job file's "optimizer" object maps onto this. Each field is used by
// the optimizers named beside it and rejected by validation where it has no meaning.
#pragma once

#include <string>

namespace shardlab {

struct OptimizerConfig {
  std::string name = "adam";         // "sgd" | "adam" | "adamw" | "rmsprop" | "adagrad"
  double lr = 1e-3;                  // all (the schedule scales it per step)
  double weight_decay = 0.0;         // all: L2 added to the gradient; adamw: decoupled decay
  double momentum = 0.0;             // sgd, rmsprop
  bool nesterov = false;             // sgd (needs momentum > 0)
  double beta1 = 0.9;                // adam, adamw
  double beta2 = 0.999;              // adam, adamw
  double eps = 1e-8;                 // adam, adamw, rmsprop, adagrad
  double alpha = 0.99;               // rmsprop: smoothing constant of the squared-gradient average
  double initial_accumulator = 0.0;  // adagrad
};

}  // namespace shardlab
