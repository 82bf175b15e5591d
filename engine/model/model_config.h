// Model descriptions as plain options structs; the job file maps onto these.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardlab {

// A multi-layer perceptron classifier: input -> [Linear -> activation] per hidden width -> Linear.
struct MlpConfig {
  int64_t input_dim = 784;
  std::vector<int64_t> hidden = {256, 128};
  int64_t num_classes = 10;
  std::string activation = "relu";  // "relu" | "gelu"
};

// A GPT-style character language model: token + position embeddings, pre-LayerNorm transformer
// blocks (causal multi-head self-attention, GELU MLP), final LayerNorm and a linear head.
struct GptConfig {
  int64_t vocab_size = 0;  // 0: taken from the corpus
  int64_t context = 64;
  int64_t width = 64;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t mlp_ratio = 4;
};

struct ModelConfig {
  std::string kind = "mlp";  // "mlp" | "gpt"
  MlpConfig mlp;
  GptConfig gpt;
  uint64_t seed = 1;  // initialisation seed
};

}  // namespace shardlab
