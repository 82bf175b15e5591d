#include "engine/model/embedding.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"
#include "engine/model/shape_util.h"

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
}

void Embedding::declare(ParamLayout& layout, const std::string& prefix, int block) {
  w_index_ = layout.add(prefix + "weight", {num_, dim_}, block);
}

void Embedding::bind(const ParamBinding& binding) {
  w_ = binding.param(w_index_);
  dw_ = binding.grad(w_index_);
}

void Embedding::init(Rng& rng) {
  SL_ENFORCE(w_ != nullptr, "Embedding: init before bind");
  rng.fill_normal({w_, static_cast<size_t>(num_ * dim_)}, 0.0f, init_std_);
}

void Embedding::forward(const Tensor& x, Tensor& y) {
  SL_ENFORCE(w_ != nullptr, "Embedding: forward before bind");
  const int64_t n = x.numel();
  ids_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    ids_[static_cast<size_t>(i)] = checked_token_id(x[i], num_, "Embedding");
  x_shape_ = x.shape();
  Shape out = x.shape();
  out.push_back(dim_);
  y.resize(out);
  for (int64_t i = 0; i < n; ++i) {
    const float* row = w_ + ids_[static_cast<size_t>(i)] * dim_;
    std::copy(row, row + dim_, y.data() + i * dim_);
  }
}

void Embedding::backward(const Tensor& dy, Tensor& dx) {
  const auto n = static_cast<int64_t>(ids_.size());
  detail::check_grad(dy, n * dim_, dim_, "Embedding");
  for (int64_t i = 0; i < n; ++i) {
    const float* src = dy.data() + i * dim_;
    float* dst = dw_ + ids_[static_cast<size_t>(i)] * dim_;
    for (int64_t j = 0; j < dim_; ++j) dst[j] += src[j];
  }
  dx.resize(x_shape_);
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
  rng.fill_normal({pos_, static_cast<size_t>(context_ * dim_)}, 0.0f, init_std_);
}

void TokenPositionEmbedding::forward(const Tensor& x, Tensor& y) {
  SL_ENFORCE(x.rank() == 2, "TokenPositionEmbedding: expected token ids [B, T], got shape {}",
             to_string(x.shape()));
  SL_ENFORCE(x.dim(1) <= context_, "TokenPositionEmbedding: sequence length {} exceeds context {}",
             x.dim(1), context_);
  tok_.forward(x, y);
  batch_ = x.dim(0);
  steps_ = x.dim(1);
  for (int64_t b = 0; b < batch_; ++b)
    for (int64_t t = 0; t < steps_; ++t) {
      float* yr = y.data() + (b * steps_ + t) * dim_;
      const float* pr = pos_ + t * dim_;
      for (int64_t j = 0; j < dim_; ++j) yr[j] += pr[j];
    }
}

void TokenPositionEmbedding::backward(const Tensor& dy, Tensor& dx) {
  tok_.backward(dy, dx);  // checks dy's size
  for (int64_t b = 0; b < batch_; ++b)
    for (int64_t t = 0; t < steps_; ++t) {
      const float* dr = dy.data() + (b * steps_ + t) * dim_;
      float* pr = dpos_ + t * dim_;
      for (int64_t j = 0; j < dim_; ++j) pr[j] += dr[j];
    }
}

}  // namespace shardlab
