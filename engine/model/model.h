// Model: an ordered list of blocks over one flat parameter buffer and one flat gradient buffer.
//
// Block i declares its parameters in block i of the ParamLayout under the prefix "blocks.<i>."
// (so "blocks.2.attn.qkv.weight" is a parameter of block 2), which keeps every block one
// contiguous range of both buffers: the unit that optimizers shard, FSDP gathers and pipeline
// stages own. The model's input is a Batch's input; its output is logits [rows, classes], one row
// per target.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/core/memory.h"
#include "engine/device/device.h"
#include "engine/device/device_buffer.h"
#include "engine/core/param_layout.h"
#include "engine/device/tensor.h"
#include "engine/model/layer.h"
#include "engine/model/model_config.h"

namespace shardlab {

// Called around each block during Model::forward and Model::backward (block indices; backward
// visits them in reverse). Default: nothing.
class BlockHooks {
 public:
  virtual ~BlockHooks() = default;
  virtual void before_forward(int block) { (void)block; }
  virtual void after_forward(int block) { (void)block; }
  virtual void before_backward(int block) { (void)block; }
  virtual void after_backward(int block) { (void)block; }
};

enum class ModelStorage {
  owned,     // the model allocates the full parameter and gradient buffers
  external,  // no buffers: every block must be bound with bind_block() before it runs
};

class Model {
 public:
  // Declares every block's parameters and, with ModelStorage::owned, allocates the two buffers
  // (zero-filled) and binds the blocks to them. Parameters stay zero until init().
  // pad_multiple: owned buffers are extended with zeros to a multiple of it (see padded_params()).
  // device: where the parameters, gradients and activations live (null: the host device); it must
  // outlive the model.
  Model(ModelConfig config, std::vector<std::unique_ptr<Layer>> blocks,
        ModelStorage storage = ModelStorage::owned, int64_t pad_multiple = 1,
        Device* device = nullptr);

  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return config_; }
  const ParamLayout& layout() const { return layout_; }
  int64_t num_params() const { return layout_.size(); }
  ModelStorage storage() const { return storage_; }
  Device& device() const { return *device_; }
  // The full buffers on the model's device, num_params() elements (empty with
  // ModelStorage::external; device_grads() is empty after release_grads()).
  DeviceSpan<float> device_params() { return params_.span().first(real(params_)); }
  DeviceSpan<const float> device_params() const {
    return DeviceSpan<const float>(params_.span()).first(real(params_));
  }
  DeviceSpan<float> device_grads() { return grads_.span().first(real(grads_)); }
  DeviceSpan<const float> device_grads() const {
    return DeviceSpan<const float>(grads_.span()).first(real(grads_));
  }
  // The same on the host, for a model on the host (cpu) device only (InternalError otherwise):
  // the code that has not moved onto the device yet (the sharded strategies, checkpoints).
  std::span<float> params() { return host(params_).first(real(params_)); }
  std::span<const float> params() const { return host(params_).first(real(params_)); }
  std::span<float> grads() { return host(grads_).first(real(grads_)); }
  std::span<const float> grads() const { return host(grads_).first(real(grads_)); }
  // Both buffers including the zero padding up to a multiple of pad_multiple, as a flat-sharding
  // strategy needs when the count does not divide by the world size. The layers never touch the
  // padding, so it stays zero. Host only, as params().
  std::span<float> padded_params() { return host(params_); }
  std::span<float> padded_grads() { return host(grads_); }
  // Both full buffers with their padding (see padded_params()), on the model's device.
  DeviceSpan<float> padded_device_params() { return params_.span(); }
  DeviceSpan<float> padded_device_grads() { return grads_.span(); }
  // The parameters on the host (a counted copy from the device).
  std::vector<float> params_to_host() const;

  // Deterministic: block i initialises from Rng::derive(seed, i), so the same seed gives
  // bit-identical parameters and one block's values do not depend on the blocks before it.
  void init(uint64_t seed);
  // Initialises block b alone, exactly as init(seed) would, through its current binding.
  void init_block(int block, uint64_t seed);
  // Zeroes grads() (allocating it again first if release_grads() freed it).
  void zero_grad();
  // Frees the full gradient buffer (ModelStorage::owned only); zero_grad() brings it back.
  void release_grads();

  // Points block b at `params` and `grads`, each holding exactly that block's range of the flat
  // layout (grads may be null when only init or forward will run).
  void bind_block(int block, DevicePtr<float> params, DevicePtr<float> grads);

  // Runs every block in order and returns the logits [rows, classes] (the last block's output
  // with its leading dimensions folded into rows). The reference stays valid until the next
  // forward; buffers are reused, so steady-state steps do not allocate.
  const Tensor& forward(const Tensor& input, BlockHooks* hooks = nullptr);
  // Back-propagates dL/dlogits of the last forward, ADDING into the bound gradients. The input's
  // gradient is not computed: block 0 runs Layer::backward_params_only.
  void backward(const Tensor& dlogits, BlockHooks* hooks = nullptr);

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  Layer& block(int i);
  // One line per block: "blocks.<i>  <kind>  <n> params".
  std::string summary() const;

 private:
  void bind_all();
  int64_t real(const DeviceBuffer<float>& b) const { return std::min(b.size(), num_params()); }
  std::span<float> host(const DeviceBuffer<float>& b) const;

  ModelConfig config_;
  Device* device_;
  std::vector<std::unique_ptr<Layer>> blocks_;
  ParamLayout layout_;
  ModelStorage storage_;
  DeviceBuffer<float> params_, grads_;
  Tensor input_;  // the input copied to the model's device, when it is elsewhere
  int64_t padded_ = 0;        // size of both buffers when allocated
  std::vector<Tensor> acts_;  // acts_[i]: output of block i
  Tensor dcur_, dnext_;       // gradients flowing between blocks in backward
};

// Builds the MLP or GPT model described by config (kind "mlp" | "gpt"), initialised from
// config.seed. Throws InvalidArgument naming the field for a bad kind or size
// (e.g. "model.heads: 3 does not divide width 64").
// With ModelStorage::external the model is returned uninitialised (its owner initialises each
// block with init_block()).
// device: as Model's (null: the host device).
std::unique_ptr<Model> build_model(const ModelConfig& config,
                                   ModelStorage storage = ModelStorage::owned,
                                   int64_t pad_multiple = 1, Device* device = nullptr);

// The layout of the model a ModelConfig describes, built without allocating its parameters.
ParamLayout model_layout(const ModelConfig& config);

}  // namespace shardlab
