// The CPU work of one rank of a ShardLab job, kernel by kernel, costed by a measured machine's
// CpuOpCosts (engine/plan/cpu_ops.h): what Linear, LayerNorm, the causal attention, GeLU/ReLU,
// the embeddings and the softmax cross-entropy of engine/model call in a forward and a backward
// (the first Linear of an MLP skips its input gradient, as Model::backward does; Linear keeps a
// copy of its input, GeLU of its input and ReLU of its output), and the optimizer's update.
// Shapes follow the engine's tensor parallelism (engine/tensor_parallel: qkv and fc1 split by
// columns, proj and fc2 by rows, the head by vocabulary).
#pragma once

#include <cstdint>
#include <string>

#include "engine/model/model_config.h"
#include "engine/plan/cpu_ops.h"

namespace shardlab::plan {

// Seconds on one core.
struct Work {
  double gemm = 0, other = 0;
  double total() const { return gemm + other; }
  Work& operator+=(const Work& w) {
    gemm += w.gemm, other += w.other;
    return *this;
  }
};

// Forward and backward of an MLP on `rows` samples.
Work mlp_work(const MlpConfig& m, int64_t rows, const CpuOpCosts& c);

// Forward and backward of the GPT blocks [first, last) of a model cut into blocks as gpt.cpp does
// (0: the embeddings, 1..layers: the transformer blocks, layers + 1: final LayerNorm, head and
// loss), on `sequences` sequences of g.context tokens, with tensor parallelism tp.
Work gpt_work(const GptConfig& g, int64_t first, int64_t last, int64_t sequences, int64_t tp,
              const CpuOpCosts& c);

// One optimizer update of `elements` parameters (the op of optimizer `name`: adam and adamw
// share one kernel, sgd, rmsprop, adagrad).
double optimizer_seconds(const std::string& name, double elements, const CpuOpCosts& c);

}  // namespace shardlab::plan
