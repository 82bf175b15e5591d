#include "engine/plan/transformer.h"

#include <fmt/format.h>

#include "engine/core/error.h"

namespace shardlab::plan {

void check_shape(const GptShape& g) {
  // Front ends check the ranges with their own names for the fields (plan_inputs.h); these
  // messages name the quantities.
  SL_ENFORCE(g.layers > 0 && g.hidden > 0 && g.heads > 0 && g.ffn >= 0 && g.seq > 0 && g.vocab > 0,
             "layers, hidden, heads, seq and vocab must be positive (got {}, {}, {}, {}, {})",
             g.layers, g.hidden, g.heads, g.seq, g.vocab);
  SL_ENFORCE(g.hidden % g.heads == 0, "hidden {} is not a multiple of heads {}", g.hidden, g.heads);
}

int64_t layer_parameters(const GptShape& g) {
  const int64_t h = g.hidden, f = g.ffn_width();
  return (4 * h * h + 4 * h) + (2 * h * f + f + h) + 4 * h;
}

int64_t gpt_parameters(const GptShape& g) {
  return g.layers * layer_parameters(g) + (g.vocab + g.seq) * g.hidden;
}

std::string recompute_name(Recompute r) {
  switch (r) {
    case Recompute::none:
      return "none";
    case Recompute::selective:
      return "selective";
    case Recompute::full:
      return "full";
  }
  return "none";
}

Recompute parse_recompute(const std::string& name) {
  if (name == "none") return Recompute::none;
  if (name == "selective") return Recompute::selective;
  if (name == "full") return Recompute::full;
  SL_THROW(InvalidArgument, "recompute must be none, selective or full, got '{}'", name);
}

double layer_forward_flops(const GptShape& g, double tokens, int t) {
  const double h = static_cast<double>(g.hidden), f = static_cast<double>(g.ffn_width());
  const double s = static_cast<double>(g.seq);
  return tokens * (2 * (4 * h * h + 2 * h * f) + 4 * s * h) / t;
}

double logits_forward_flops(const GptShape& g, double tokens, int t) {
  return tokens * 2.0 * static_cast<double>(g.hidden) * static_cast<double>(g.vocab) / t;
}

double model_flops(const GptShape& g, double batch) {
  const double tokens = batch * static_cast<double>(g.seq);
  return 3 * (static_cast<double>(g.layers) * layer_forward_flops(g, tokens, 1) +
              logits_forward_flops(g, tokens, 1));
}

double hardware_flops(const GptShape& g, double batch, Recompute r) {
  const double tokens = batch * static_cast<double>(g.seq);
  const double layers = static_cast<double>(g.layers);
  switch (r) {
    case Recompute::none:
      return model_flops(g, batch);
    case Recompute::full:
      return model_flops(g, batch) + layers * layer_forward_flops(g, tokens, 1);
    case Recompute::selective:
      // Korthikanti's s/3h for s/6h: the attention term 12 B L s^2 h counted twice.
      return model_flops(g, batch) +
             layers * 12 * tokens * static_cast<double>(g.seq) * static_cast<double>(g.hidden);
  }
  return model_flops(g, batch);
}

double layer_activation_bytes(const GptShape& g, double b, int t, bool sp, Recompute r) {
  const double s = static_cast<double>(g.seq), h = static_cast<double>(g.hidden);
  const double a = static_cast<double>(g.heads);
  const double sbh = s * b * h;
  switch (r) {
    case Recompute::full:
      return sp ? 2 * sbh / t : 2 * sbh;
    case Recompute::selective:
      return sp ? 34 * sbh / t : sbh * (10 + 24.0 / t);
    case Recompute::none:
      return sp ? sbh / t * (34 + 5 * a * s / h) : sbh * (10 + 24.0 / t + 5 * a * s / (h * t));
  }
  return 0;
}

}  // namespace shardlab::plan
