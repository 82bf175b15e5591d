#include "engine/model/model.h"

#include <algorithm>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/model/gpt.h"
#include "engine/model/mlp.h"

namespace shardlab {

Model::Model(ModelConfig config, std::vector<std::unique_ptr<Layer>> blocks)
    : config_(std::move(config)), blocks_(std::move(blocks)) {
  SL_ENFORCE(!blocks_.empty(), "Model: needs at least one block");
  for (size_t i = 0; i < blocks_.size(); ++i) {
    SL_ENFORCE(blocks_[i] != nullptr, "Model: block {} is null", i);
    blocks_[i]->declare(layout_, fmt::format("blocks.{}.", i), static_cast<int>(i));
  }
  params_.assign(static_cast<size_t>(layout_.size()), 0.0f);
  grads_.assign(static_cast<size_t>(layout_.size()), 0.0f);
  const ParamBinding binding{&layout_, params_.data(), grads_.data(), 0};
  for (auto& b : blocks_) b->bind(binding);
  acts_.resize(blocks_.size());
}

void Model::init(uint64_t seed) {
  for (size_t i = 0; i < blocks_.size(); ++i) {
    Rng rng = Rng::derive(seed, i);
    blocks_[i]->init(rng);
  }
}

void Model::zero_grad() {
  std::fill(grads_.begin(), grads_.end(), 0.0f);
}

const Tensor& Model::forward(const Tensor& input) {
  for (size_t i = 0; i < blocks_.size(); ++i)
    blocks_[i]->forward(i == 0 ? input : acts_[i - 1], acts_[i]);
  Tensor& out = acts_.back();
  SL_ENFORCE(out.rank() >= 1, "Model: the last block produced a scalar, expected logits");
  const int64_t classes = out.dim(-1);
  out.reshape({classes > 0 ? out.numel() / classes : 0, classes});
  return out;
}

void Model::backward(const Tensor& dlogits) {
  const Tensor& logits = acts_.back();
  SL_ENFORCE(dlogits.shape() == logits.shape(),
             "Model: dlogits of shape {} do not match the last logits {}",
             to_string(dlogits.shape()), to_string(logits.shape()));
  // Block 0's input gradient (with respect to the data) is computed and dropped: the Layer
  // interface has no way to skip it, and it is one small product per step.
  for (size_t i = blocks_.size(); i-- > 0;) {
    blocks_[i]->backward(i + 1 == blocks_.size() ? dlogits : dcur_, dnext_);
    std::swap(dcur_, dnext_);
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

std::unique_ptr<Model> build_model(const ModelConfig& config) {
  std::vector<std::unique_ptr<Layer>> blocks;
  if (config.kind == "mlp") {
    blocks = build_mlp_blocks(config.mlp);
  } else if (config.kind == "gpt") {
    blocks = build_gpt_blocks(config.gpt);
  } else {
    SL_THROW(InvalidArgument, "model.kind: unknown kind '{}' (expected mlp or gpt)", config.kind);
  }
  auto model = std::make_unique<Model>(config, std::move(blocks));
  model->init(config.seed);
  return model;
}

}  // namespace shardlab
