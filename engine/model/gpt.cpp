#include "engine/model/gpt.h"

#include "engine/core/error.h"
#include "engine/model/embedding.h"
#include "engine/model/layer_norm.h"
#include "engine/model/linear.h"
#include "engine/model/sequential.h"
#include "engine/model/transformer_block.h"

namespace shardlab {

void validate_gpt_config(const GptConfig& config) {
  SL_ENFORCE(config.vocab_size > 0,
             "model.gpt.vocab_size: must be > 0 (it is normally taken from the corpus), got {}",
             config.vocab_size);
  SL_ENFORCE(config.context > 0, "model.gpt.context: must be > 0, got {}", config.context);
  SL_ENFORCE(config.width > 0, "model.gpt.width: must be > 0, got {}", config.width);
  SL_ENFORCE(config.layers >= 0, "model.gpt.layers: must be >= 0, got {}", config.layers);
  SL_ENFORCE(config.heads > 0, "model.gpt.heads: must be > 0, got {}", config.heads);
  SL_ENFORCE(config.width % config.heads == 0, "model.gpt.heads: {} does not divide width {}",
             config.heads, config.width);
  SL_ENFORCE(config.mlp_ratio > 0, "model.gpt.mlp_ratio: must be > 0, got {}", config.mlp_ratio);
}

std::vector<std::unique_ptr<Layer>> build_gpt_blocks(const GptConfig& config) {
  validate_gpt_config(config);
  std::vector<std::unique_ptr<Layer>> blocks;
  blocks.push_back(
      std::make_unique<TokenPositionEmbedding>(config.vocab_size, config.context, config.width));
  for (int64_t l = 0; l < config.layers; ++l)
    blocks.push_back(std::make_unique<TransformerBlock>(config.width, config.heads, config.context,
                                                        config.mlp_ratio));
  auto head = std::make_unique<Sequential>("LayerNorm+Linear");
  head->emplace<LayerNorm>("ln_f", config.width);
  head->emplace<Linear>("head", config.width, config.vocab_size, /*bias=*/false);
  blocks.push_back(std::move(head));
  return blocks;
}

}  // namespace shardlab
