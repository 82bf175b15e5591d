#include "engine/tensor_parallel/tp_gpt.h"

#include "engine/core/error.h"
#include "engine/model/activations.h"
#include "engine/model/gpt.h"
#include "engine/model/layer_norm.h"
#include "engine/model/sequential.h"
#include "engine/model/transformer_block.h"
#include "engine/tensor_parallel/tp_attention.h"
#include "engine/tensor_parallel/tp_embedding.h"
#include "engine/tensor_parallel/tp_linear.h"

namespace shardlab {

void validate_tp_gpt(const GptConfig& config, int tp) {
  validate_gpt_config(config);
  SL_ENFORCE(tp >= 1, "parallel.tp: must be >= 1, got {}", tp);
  SL_ENFORCE(config.heads % tp == 0, "parallel.tp: {} does not divide model.gpt.heads = {}", tp,
             config.heads);
  // Every rank needs at least one vocabulary row for its slice of the head.
  SL_ENFORCE(config.vocab_size >= tp, "parallel.tp: {} exceeds model.gpt.vocab_size = {}", tp,
             config.vocab_size);
}

std::unique_ptr<Layer> build_tp_gpt_block(const GptConfig& config, int block, TpGroup tp) {
  validate_tp_gpt(config, tp.size);
  SL_ENFORCE(tp.rank >= 0 && tp.rank < tp.size, "tensor parallelism: tp rank {} outside [0, {})",
             tp.rank, tp.size);
  const int64_t last = config.layers + 1;
  SL_ENFORCE(block >= 0 && block <= last, "GPT: block {} outside [0, {}]", block, last);
  const int64_t C = config.width;
  if (block == 0)
    return std::make_unique<VocabParallelEmbedding>(config.vocab_size, config.context, C, tp);
  if (block == last) {
    auto head = std::make_unique<Sequential>("LayerNorm+Linear");
    head->emplace<LayerNorm>("ln_f", C);
    head->emplace<ColumnParallelLinear>("head", C, tp_vocab_part(config, tp).size(),
                                        /*bias=*/false, tp);
    return head;
  }
  const int64_t hidden = tp.part(config.mlp_ratio * C).size();
  auto mlp = std::make_unique<Sequential>("Mlp");
  mlp->emplace<ColumnParallelLinear>("fc", C, hidden, /*bias=*/true, tp);
  mlp->emplace<Gelu>("act");
  mlp->emplace<RowParallelLinear>("proj", hidden, C, /*bias=*/true, tp);
  return std::make_unique<TransformerBlock>(
      C, std::make_unique<TensorParallelAttention>(C, config.heads, config.context, tp),
      std::move(mlp));
}

}  // namespace shardlab
