// The base optimizers' facts, written once: each optimizer's name, the hyper-parameters it reads,
// its state arrays (name, floats per parameter, when it keeps them, their initial value), the
// fused kernel its update runs and its factory. make_optimizer(), validate_optimizer_config(), the
// GPU optimizer, the memory planner, the benchmarks, job validation and the app's job form all read
// them from here, so adding an optimizer is one entry in registry.cpp (plus its tests).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/optim/optimizer.h"
#include "engine/optim/optimizer_config.h"
#include "engine/optim/update_args.h"

namespace shardlab {

// The range rule a hyper-parameter obeys for an optimizer that reads it.
enum class HyperRule {
  positive,       // > 0 (lr, eps)
  non_negative,   // >= 0
  unit,           // in [0, 1) (betas, alpha)
  needs_momentum  // a flag that needs momentum > 0 (nesterov)
};

// One field of OptimizerConfig (the job file's "optimizer" object), in the struct's order.
struct HyperParameter {
  const char* name;                       // as the job file spells it: "lr", "beta1"
  double (*get)(const OptimizerConfig&);  // the value (a flag reads 1 or 0)
  HyperRule rule;
  // True for a field whose default is 0/false: set on an optimizer that does not read it, the
  // optimizer module itself rejects it. The others (betas, eps, alpha) have non-zero defaults, so
  // only a job, which knows what was written, can tell "set" from "left alone".
  bool zero_default;
};

// A per-parameter state array an optimizer keeps.
struct StateArraySpec {
  const char* name;       // as Optimizer::state() names it: "exp_avg", "momentum_buffer"
  int64_t per_param = 1;  // floats per parameter element
  // Whether it is kept under `config` (e.g. a momentum buffer only with momentum != 0); null:
  // always.
  bool (*present)(const OptimizerConfig&) = nullptr;
  // Its initial value (Adagrad's initial_accumulator); null: zero.
  double (*initial)(const OptimizerConfig&) = nullptr;
};

struct OptimizerSpec {
  std::string name;                           // "adam"
  std::vector<std::string> hyper_parameters;  // the HyperParameter names it reads
  std::vector<StateArraySpec> state;          // in Optimizer::state() order
  // The kernel arguments of one update (update_args.h); state pointers in `state` order, null for
  // an array not kept.
  UpdateArgs (*args)(const OptimizerConfig&, const UpdateBuffers&);
  // Builds it from a validated config.
  std::unique_ptr<Optimizer> (*make)(const OptimizerConfig&);

  bool reads(std::string_view hyper_parameter) const;
};

// Every optimizer, in the order the app and `bench optimizer` list them.
const std::vector<OptimizerSpec>& optimizer_registry();
// Every hyper-parameter, in OptimizerConfig's (and the state format's) order.
const std::vector<HyperParameter>& hyper_parameters();

// The entry named `name`, or null.
const OptimizerSpec* find_optimizer(std::string_view name);
// The entry named config.name; throws InvalidArgument "optimizer.name: unknown optimizer 'x'
// (known: sgd, ...)".
const OptimizerSpec& optimizer_spec(const OptimizerConfig& config);
// The names of the optimizers that read `hyper_parameter`, in registry order.
std::vector<std::string> optimizers_reading(std::string_view hyper_parameter);

// One state array as `config` keeps it.
struct StateArray {
  std::string name;
  int64_t per_param = 1;
  double initial = 0.0;
};
// The state arrays config's optimizer keeps under config, in state() order (unknown name: throws
// as optimizer_spec does).
std::vector<StateArray> state_arrays(const OptimizerConfig& config);
// Floats of optimizer state per parameter element (Adam: 2; SGD without momentum: 0).
int64_t state_floats_per_param(const OptimizerConfig& config);

}  // namespace shardlab
