// The MLP classifier: block i < hidden.size() is Linear(prev, hidden[i]) + activation (children
// "fc" and "act"), and the last block is the output Linear(prev, num_classes) (child "out").
// Input [B, input_dim] -> logits [B, num_classes].
#pragma once

#include <memory>
#include <vector>

#include "engine/model/layer.h"
#include "engine/model/model_config.h"

namespace shardlab {

// Throws InvalidArgument naming the field ("model.hidden[1]: must be > 0, got 0").
void validate_mlp_config(const MlpConfig& config);

// The blocks of the MLP described by config (validated first), for Model's constructor.
std::vector<std::unique_ptr<Layer>> build_mlp_blocks(const MlpConfig& config);

}  // namespace shardlab
