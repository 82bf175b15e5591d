// Model: an ordered list of blocks over one flat parameter buffer and one flat gradient buffer.
//
// Block i declares its parameters in block i of the ParamLayout under the prefix "blocks.<i>."
// (so "blocks.2.attn.qkv.weight" is a parameter of block 2), which keeps every block one
// contiguous range of both buffers: the unit that optimizers shard, FSDP gathers and pipeline
// stages own. The model's input is a Batch's input; its output is logits [rows, classes], one row
// per target.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/core/param_layout.h"
#include "engine/core/tensor.h"
#include "engine/model/layer.h"
#include "engine/model/model_config.h"

namespace shardlab {

class Model {
 public:
  // Declares every block's parameters, allocates the two buffers (zero-filled) and binds the
  // blocks to them. Parameters stay zero until init().
  Model(ModelConfig config, std::vector<std::unique_ptr<Layer>> blocks);

  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  int64_t num_params() const { return layout_.size(); }
  std::span<float> params() { return params_; }
  std::span<const float> params() const { return params_; }
  std::span<float> grads() { return grads_; }
  std::span<const float> grads() const { return grads_; }

  // Deterministic: block i initialises from Rng::derive(seed, i), so the same seed gives
  // bit-identical parameters and one block's values do not depend on the blocks before it.
  void init(uint64_t seed);
  void zero_grad();

  // Runs every block in order and returns the logits [rows, classes] (the last block's output
  // with its leading dimensions folded into rows). The reference stays valid until the next
  // forward; buffers are reused, so steady-state steps do not allocate.
  const Tensor& forward(const Tensor& input);
  // Back-propagates dL/dlogits of the last forward, ADDING into grads().
  void backward(const Tensor& dlogits);

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  Layer& block(int i);
  // One line per block: "blocks.<i>  <kind>  <n> params".
  std::string summary() const;

 private:
  ModelConfig config_;
  std::vector<std::unique_ptr<Layer>> blocks_;
  ParamLayout layout_;
  std::vector<float> params_, grads_;
  std::vector<Tensor> acts_;  // acts_[i]: output of block i
  Tensor dcur_, dnext_;       // gradients flowing between blocks in backward
};

// Builds the MLP or GPT model described by config (kind "mlp" | "gpt"), initialised from
// config.seed. Throws InvalidArgument naming the field for a bad kind or size
// (e.g. "model.heads: 3 does not divide width 64").
std::unique_ptr<Model> build_model(const ModelConfig& config);

}  // namespace shardlab
