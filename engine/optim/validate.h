// Hyper-parameter checks shared by make_optimizer() and the optimizer constructors, exposed so a
// job loader can reject a bad "optimizer" object before anything is built.
#pragma once

#include "engine/optim/optimizer_config.h"

namespace shardlab {

// Throws InvalidArgument naming the field ("optimizer.lr: must be > 0, got -1") when a value the
// named optimizer uses is out of range, or when a field that defaults to zero/false and has no
// meaning for it (momentum, nesterov, initial_accumulator) is set. Unknown names are reported with
// the list of known ones.
void validate_optimizer_config(const OptimizerConfig& config);

}  // namespace shardlab
