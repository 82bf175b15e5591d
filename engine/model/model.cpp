#include "engine/model/model.h"

#include <algorithm>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/model/gpt.h"
#include "engine/model/mlp.h"

namespace shardlab {

Model::Model(ModelConfig config, std::vector<std::unique_ptr<Layer>> blocks, ModelStorage storage,
             int64_t pad_multiple, Device* device)
    : config_(std::move(config)),
      device_(device ? device : &host_device()),
      blocks_(std::move(blocks)),
      storage_(storage) {
  SL_ENFORCE(pad_multiple >= 1, "Model: pad_multiple must be >= 1, got {}", pad_multiple);
  SL_ENFORCE(!blocks_.empty(), "Model: needs at least one block");
  for (size_t i = 0; i < blocks_.size(); ++i) {
    SL_ENFORCE(blocks_[i] != nullptr, "Model: block {} is null", i);
    blocks_[i]->declare(layout_, fmt::format("blocks.{}.", i), static_cast<int>(i));
  }
  padded_ = (layout_.size() + pad_multiple - 1) / pad_multiple * pad_multiple;
  if (storage_ == ModelStorage::owned) {
    params_ = DeviceBuffer<float>(*device_, MemCategory::params, padded_);
    grads_ = DeviceBuffer<float>(*device_, MemCategory::grads, padded_);
    bind_all();
  } else {
    params_.bind(*device_, MemCategory::params);
    grads_.bind(*device_, MemCategory::grads);
  }
  acts_.resize(blocks_.size());
}

std::span<float> Model::host(const DeviceBuffer<float>& b) const {
  SL_ENFORCE_T(InternalError, device_->kind() == DeviceKind::cpu,
               "host access to a model on the {} device", to_string(device_->kind()));
  return {const_cast<float*>(b.data().raw()), static_cast<size_t>(b.size())};
}

std::vector<float> Model::params_to_host() const {
  std::vector<float> h(static_cast<size_t>(real(params_)));
  device_->copy_to_host(device_params(), std::span<float>(h));
  return h;
}

void Model::bind_all() {
  const ParamBinding binding{&layout_, device_, params_.data(),
                             grads_.empty() ? DevicePtr<float>() : grads_.data(), 0};
  for (auto& b : blocks_) b->bind(binding);
}

void Model::bind_block(int block, DevicePtr<float> params, DevicePtr<float> grads) {
  Layer& l = this->block(block);
  l.bind(ParamBinding{&layout_, device_, params, grads, layout_.block_range(block).begin});
}

void Model::init(uint64_t seed) {
  for (int i = 0; i < num_blocks(); ++i) init_block(i, seed);
}

void Model::init_block(int block, uint64_t seed) {
  Rng rng = Rng::derive(seed, static_cast<uint64_t>(block));
  this->block(block).init(rng);
}

void Model::zero_grad() {
  if (storage_ == ModelStorage::owned && grads_.empty() && layout_.size() > 0) {
    grads_ = DeviceBuffer<float>(*device_, MemCategory::grads, padded_);
    bind_all();
    return;
  }
  if (!grads_.empty()) device_->fill(grads_.data(), grads_.size(), 0.0f);
}

void Model::release_grads() {
  SL_ENFORCE(storage_ == ModelStorage::owned, "Model: release_grads needs owned storage");
  grads_.reset();
  bind_all();
}

const Tensor& Model::forward(const Tensor& input, BlockHooks* hooks) {
  const Tensor* in = &input;
  if (&input.device() != device_) {  // data from the host: one counted copy to the device
    const std::vector<float> host = input.to_host();
    input_.resize(input.shape(), *device_);
    device_->copy_from_host(std::span<const float>(host), input_.dspan());
    in = &input_;
  }
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const int b = static_cast<int>(i);
    if (hooks) hooks->before_forward(b);
    blocks_[i]->forward(i == 0 ? *in : acts_[i - 1], acts_[i]);
    if (hooks) hooks->after_forward(b);
  }
  Tensor& out = acts_.back();
  SL_ENFORCE(out.rank() >= 1, "Model: the last block produced a scalar, expected logits");
  const int64_t classes = out.dim(-1);
  out.reshape({classes > 0 ? out.numel() / classes : 0, classes});
  return out;
}

void Model::backward(const Tensor& dlogits, BlockHooks* hooks) {
  const Tensor& logits = acts_.back();
  SL_ENFORCE(dlogits.shape() == logits.shape(),
             "Model: dlogits of shape {} do not match the last logits {}",
             to_string(dlogits.shape()), to_string(logits.shape()));
  // Nobody uses block 0's input gradient (with respect to the data): it runs
  // backward_params_only, which skips it where the block can (an MLP's first Linear skips its dx
  // GEMM: for 784-512-256-10, a quarter of a training step's FLOPs). A pipeline's first stage
  // drives its blocks itself (engine/hybrid/pipeline_stage.cpp).
  for (size_t i = blocks_.size(); i-- > 0;) {
    const int b = static_cast<int>(i);
    if (hooks) hooks->before_backward(b);
    const Tensor& dy = i + 1 == blocks_.size() ? dlogits : dcur_;
    if (i == 0)
      blocks_[i]->backward_params_only(dy, dnext_);
    else
      blocks_[i]->backward(dy, dnext_);
    std::swap(dcur_, dnext_);
    if (hooks) hooks->after_backward(b);
  }
}

Layer& Model::block(int i) {
  SL_ENFORCE(i >= 0 && i < num_blocks(), "Model: block {} out of range ({} blocks)", i,
             num_blocks());
  return *blocks_[static_cast<size_t>(i)];
}

std::string Model::summary() const {
  std::string s;
  for (int i = 0; i < num_blocks(); ++i) {
    const int64_t n = layout_.block_range(i).size();
    s += fmt::format("blocks.{:<3} {:<24} {:>10} params\n", i,
                     blocks_[static_cast<size_t>(i)]->kind(), n);
  }
  return s;
}

std::unique_ptr<Model> build_model(const ModelConfig& config, ModelStorage storage,
                                   int64_t pad_multiple, Device* device) {
  std::vector<std::unique_ptr<Layer>> blocks;
  if (config.kind == "mlp") {
    blocks = build_mlp_blocks(config.mlp);
  } else if (config.kind == "gpt") {
    blocks = build_gpt_blocks(config.gpt);
  } else {
    SL_THROW(InvalidArgument, "model.kind: unknown kind '{}' (expected mlp or gpt)", config.kind);
  }
  auto model = std::make_unique<Model>(config, std::move(blocks), storage, pad_multiple, device);
  if (storage == ModelStorage::owned) model->init(config.seed);
  return model;
}

ParamLayout model_layout(const ModelConfig& config) {
  return build_model(config, ModelStorage::external)->layout();
}

}  // namespace shardlab
