// The GPT model (engine/model/gpt.h) cut for tensor parallelism, block by block, with the same
// block order and parameter names as build_gpt_blocks() and local (sliced) shapes:
//
//   block 0        VocabParallelEmbedding ("tok.weight" rows part(vocab), "pos.weight" replicated)
//   blocks 1..L    TransformerBlock with TensorParallelAttention (heads part(heads)) and the MLP as
//                  ColumnParallelLinear "fc" (hidden units part(mlp_ratio*width)) -> GELU ->
//                  RowParallelLinear "proj"; LayerNorms replicated
//   block L + 1    LayerNorm "ln_f" (replicated) and a column-parallel bias-free "head" holding
//                  the vocabulary rows part(vocab); its output is this rank's logit columns,
//                  which VocabParallelCrossEntropy turns into the loss
//
// With tp.size == 1 every block computes exactly what the plain GPT block computes.
#pragma once

#include <memory>

#include "engine/model/layer.h"
#include "engine/model/model_config.h"
#include "engine/tensor_parallel/tp_group.h"

namespace shardlab {

// Throws InvalidArgument naming the field when tp does not divide model.gpt.heads (and so the
// width and the MLP's hidden size), after validate_gpt_config(); also when tp < 1 or tp exceeds
// the vocabulary (every rank needs at least one row of the head).
void validate_tp_gpt(const GptConfig& config, int tp);

// Block `block` (0 .. layers + 1) for tp rank tp.rank of tp.size.
std::unique_ptr<Layer> build_tp_gpt_block(const GptConfig& config, int block, TpGroup tp);

// The vocabulary rows of the head's and the embedding's local slices: tp.part(vocab_size).
inline IndexRange tp_vocab_part(const GptConfig& config, TpGroup tp) {
  return tp.part(config.vocab_size);
}

}  // namespace shardlab
