#include "engine/model/mlp.h"

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/model/activations.h"
#include "engine/model/linear.h"
#include "engine/model/sequential.h"

namespace shardlab {

void validate_mlp_config(const MlpConfig& config) {
  SL_ENFORCE(config.input_dim > 0, "model.mlp.input_dim: must be > 0, got {}", config.input_dim);
  for (size_t i = 0; i < config.hidden.size(); ++i)
    SL_ENFORCE(config.hidden[i] > 0, "model.mlp.hidden[{}]: must be > 0, got {}", i,
               config.hidden[i]);
  SL_ENFORCE(config.num_classes > 0, "model.mlp.num_classes: must be > 0, got {}",
             config.num_classes);
  SL_ENFORCE(config.activation == "relu" || config.activation == "gelu",
             "model.mlp.activation: unknown activation '{}' (expected relu or gelu)",
             config.activation);
}

std::vector<std::unique_ptr<Layer>> build_mlp_blocks(const MlpConfig& config) {
  validate_mlp_config(config);
  std::vector<std::unique_ptr<Layer>> blocks;
  int64_t prev = config.input_dim;
  for (int64_t width : config.hidden) {
    auto act = make_activation(config.activation, "model.mlp.activation");
    auto block = std::make_unique<Sequential>(fmt::format("Linear+{}", act->kind()));
    block->emplace<Linear>("fc", prev, width);
    block->add("act", std::move(act));
    blocks.push_back(std::move(block));
    prev = width;
  }
  auto out = std::make_unique<Sequential>("Linear");
  out->emplace<Linear>("out", prev, config.num_classes);
  blocks.push_back(std::move(out));
  return blocks;
}

}  // namespace shardlab
