// The GPT character language model:
//   block 0:         TokenPositionEmbedding ("tok.weight", "pos.weight")
//   blocks 1..L:     pre-LayerNorm TransformerBlock (see transformer_block.h)
//   block L + 1:     final LayerNorm ("ln_f") and a bias-free Linear head to the vocabulary
//                    ("head.weight"; GPT-2's head has no bias either).
// Input [B, T] token ids (exact floats), T <= context -> logits [B*T, vocab], row b*T + t
// predicting the token after position t of sequence b.
#pragma once

#include <memory>
#include <vector>

#include "engine/model/layer.h"
#include "engine/model/model_config.h"

namespace shardlab {

// Throws InvalidArgument naming the field ("model.heads: 3 does not divide width 64",
// "model.vocab_size: must be > 0 ..." when the corpus has not filled it in).
void validate_gpt_config(const GptConfig& config);

// The blocks of the GPT model described by config (validated first), for Model's constructor.
std::vector<std::unique_ptr<Layer>> build_gpt_blocks(const GptConfig& config);

}  // namespace shardlab
