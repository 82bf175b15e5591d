#include "engine/model/embedding.h"

#include <cmath>
#include <limits>

#include "engine/core/error.h"
#include "engine/model/shape_util.h"
#include "engine/model/param_init.h"

namespace shardlab {

int64_t checked_token_id(float id, int64_t num, std::string_view who) {
  // Checked as a float first: casting NaN or a huge value to an integer is undefined.
  SL_ENFORCE(id >= 0.0f && id < static_cast<float>(num) && id == std::floor(id),
             "{}: id {} is not an integer in [0, {})", who, id, num);
  return static_cast<int64_t>(id);
}

Embedding::Embedding(int64_t num, int64_t dim, float init_std)
    : num_(num), dim_(dim), init_std_(init_std) {
  SL_ENFORCE(num > 0 && dim > 0, "Embedding: sizes must be > 0, got num={} dim={}", num, dim);
  SL_ENFORCE(num <= std::numeric_limits<int32_t>::max(),
             "Embedding: {} rows exceed the 32-bit ids of the kernels", num);
}

void Embedding::declare(ParamLayout& layout, const std::string& prefix, int block) {
  w_index_ = layout.add(prefix + "weight", {num_, dim_}, block);
}

void Embedding::bind(const ParamBinding& binding) {
  dev_ = binding.device;
  if (device_ids_.device() != dev_) device_ids_.bind(*dev_, MemCategory::activations);
  w_ = binding.param(w_index_);
  dw_ = binding.grad(w_index_);
}

void Embedding::init(Rng& rng) {
  SL_ENFORCE(w_, "Embedding: init before bind");
  init_normal(*dev_, w_, num_ * dim_, rng, 0.0f, init_std_);
}

void Embedding::forward(const Tensor& x, Tensor& y) {
  lookup(x, y, {}, 1);
}

void Embedding::backward(const Tensor& dy, Tensor& dx) {
  scatter(dy, dx, {}, 1);
}

void Embedding::lookup(const Tensor& x, Tensor& y, DevicePtr<const float> pos, int64_t steps) {
  SL_ENFORCE(w_, "Embedding: forward before bind");
  const int64_t n = x.numel();
  // The ids are checked on the host (and kept there: a device may sort them for the backward).
  const std::vector<float> host = x.to_host();
  ids_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    ids_[static_cast<size_t>(i)] =
        static_cast<int32_t>(checked_token_id(host[static_cast<size_t>(i)], num_, "Embedding"));
  device_ids_.resize(n);
  dev_->copy_from_host(std::span<const int32_t>(ids_), device_ids_.span());
  x_shape_ = x.shape();
  Shape out = x.shape();
  out.push_back(dim_);
  y.resize(out, *dev_);
  dev_->embedding_forward(device_ids_.data(), w_, pos, y.dev(), n, steps, dim_);
}

void Embedding::scatter(const Tensor& dy, Tensor& dx, DevicePtr<float> dpos, int64_t steps) {
  const auto n = static_cast<int64_t>(ids_.size());
  detail::check_grad(dy, n * dim_, dim_, "Embedding");
  dev_->embedding_backward(device_ids_.data(), ids_, dy.dev(), dw_, dpos, n, steps, dim_, num_);
  dx.resize(x_shape_, *dev_);
  dx.zero();
}

TokenPositionEmbedding::TokenPositionEmbedding(int64_t vocab, int64_t context, int64_t dim,
                                               float init_std)
    : tok_(vocab, dim, init_std), context_(context), dim_(dim), init_std_(init_std) {
  SL_ENFORCE(context > 0, "TokenPositionEmbedding: context must be > 0, got {}", context);
}

void TokenPositionEmbedding::declare(ParamLayout& layout, const std::string& prefix, int block) {
  tok_.declare(layout, prefix + "tok.", block);
  pos_index_ = layout.add(prefix + "pos.weight", {context_, dim_}, block);
}

void TokenPositionEmbedding::bind(const ParamBinding& binding) {
  tok_.bind(binding);
  pos_ = binding.param(pos_index_);
  dpos_ = binding.grad(pos_index_);
}

void TokenPositionEmbedding::init(Rng& rng) {
  tok_.init(rng);
  init_normal(*tok_.dev_, pos_, context_ * dim_, rng, 0.0f, init_std_);
}

void TokenPositionEmbedding::forward(const Tensor& x, Tensor& y) {
  SL_ENFORCE(x.rank() == 2, "TokenPositionEmbedding: expected token ids [B, T], got shape {}",
             to_string(x.shape()));
  SL_ENFORCE(x.dim(1) <= context_, "TokenPositionEmbedding: sequence length {} exceeds context {}",
             x.dim(1), context_);
  tok_.lookup(x, y, pos_, x.dim(1));  // y[b, t] = tok[x[b, t]] + pos[t]
  batch_ = x.dim(0);
  steps_ = x.dim(1);
}

void TokenPositionEmbedding::backward(const Tensor& dy, Tensor& dx) {
  tok_.scatter(dy, dx, dpos_, steps_);  // checks dy's size
}

}  // namespace shardlab
