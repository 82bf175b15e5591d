// A GPT-style transformer's size, FLOPs and activation memory, from the published formulas:
//   parameters  Narayanan et al. 2021 (Megatron-LM, SC'21) eq. 2, P = 12 L h^2 (1 + 13/12h +
//               (V + s)/12Lh), generalised to an MLP of width F (F = 4h gives eq. 2 exactly);
//   FLOPs       per layer and token 2 x (4h^2 + 2hF) for the matrix products and 4sh for
//               attention's scores and weighted sum, forward; backward twice the forward; the
//               logits 2hV forward. With F = 4h: model FLOPs 72 B L s h^2 (1 + s/6h + V/12hL)
//               (Korthikanti et al. 2022) and, with full recomputation, 96 B L s h^2 (1 + s/6h +
//               V/16hL) (Narayanan eq. 3); selective recomputation uses s/3h for s/6h.
//   activations Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
//               Models"), table 2: bytes one layer keeps for backward, 16-bit activations.
#pragma once

#include <cstdint>
#include <string>

namespace shardlab::plan {

struct GptShape {
  int64_t layers = 0;  // L
  int64_t hidden = 0;  // h
  int64_t heads = 0;   // a
  int64_t ffn = 0;     // F (0: 4h)
  int64_t seq = 0;     // s
  int64_t vocab = 0;   // V
  int64_t ffn_width() const { return ffn > 0 ? ffn : 4 * hidden; }
};

// InvalidArgument when a size is not positive or h is not a multiple of a.
void check_shape(const GptShape& g);

// Parameters of one transformer layer: attention (4h^2 + 4h), MLP (2hF + F + h), two layer norms
// (4h).
int64_t layer_parameters(const GptShape& g);
// The whole model, as eq. 2 counts it: L layers and the token and position embeddings ((V + s)h;
// the output head shares the token embedding). Eq. 2 leaves out the final layer norm (2h), and so
// does this count.
int64_t gpt_parameters(const GptShape& g);

enum class Recompute { none, selective, full };
std::string recompute_name(Recompute r);
// "none", "selective", "full"; InvalidArgument otherwise.
Recompute parse_recompute(const std::string& name);

// Forward FLOPs of one layer for `tokens` = b s tokens of sequence length s, on one of t tensor
// parallel ranks.
double layer_forward_flops(const GptShape& g, double tokens, int t);
// Forward FLOPs of the output logits (2 h V per token) on one of t ranks.
double logits_forward_flops(const GptShape& g, double tokens, int t);
// Model FLOPs of one training step of `batch` sequences (forward and backward, no
// recomputation): what MFU counts.
double model_flops(const GptShape& g, double batch);
// The FLOPs the GPUs execute: model FLOPs plus the recomputed forward (full: every layer's;
// selective: attention's scores and weighted sum, counted as Korthikanti does).
double hardware_flops(const GptShape& g, double batch, Recompute r);

// Activation bytes one layer keeps for its backward per micro-batch of b sequences (table 2),
// on one of t tensor parallel ranks, with or without sequence parallelism.
double layer_activation_bytes(const GptShape& g, double b, int t, bool sequence_parallel,
                              Recompute r);

}  // namespace shardlab::plan
