#include "engine/model/layer_norm.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/model/shape_util.h"
#include "kernels/cpu/layer_norm.h"

namespace shardlab {

LayerNorm::LayerNorm(int64_t dim, float eps) : dim_(dim), eps_(eps) {
  SL_ENFORCE(dim > 0, "LayerNorm: dim must be > 0, got {}", dim);
  SL_ENFORCE(eps > 0.0f, "LayerNorm: eps must be > 0, got {}", eps);
}

void LayerNorm::declare(ParamLayout& layout, const std::string& prefix, int block) {
  w_index_ = layout.add(prefix + "weight", {dim_}, block);
  b_index_ = layout.add(prefix + "bias", {dim_}, block);
}

void LayerNorm::bind(const ParamBinding& binding) {
  w_ = binding.param(w_index_);
  dw_ = binding.grad(w_index_);
  b_ = binding.param(b_index_);
  db_ = binding.grad(b_index_);
}

void LayerNorm::init(Rng& rng) {
  (void)rng;
  SL_ENFORCE(w_ != nullptr, "LayerNorm: init before bind");
  std::fill(w_, w_ + dim_, 1.0f);
  std::fill(b_, b_ + dim_, 0.0f);
}

void LayerNorm::forward(const Tensor& x, Tensor& y) {
  SL_ENFORCE(w_ != nullptr, "LayerNorm: forward before bind");
  const int64_t rows = detail::rows_with_last(x, dim_, "LayerNorm");
  y.resize(x.shape());
  xhat_.resize(x.shape());
  if (static_cast<size_t>(rows) > rstd_.capacity()) rstd_.reserve(static_cast<size_t>(rows));
  rstd_.resize(static_cast<size_t>(rows));
  kernels::layer_norm_forward(x.data(), w_, b_, y.data(), xhat_.data(), rstd_.data(), rows, dim_,
                              eps_);
}

void LayerNorm::backward(const Tensor& dy, Tensor& dx) {
  const int64_t rows = static_cast<int64_t>(rstd_.size());
  detail::check_grad(dy, rows * dim_, dim_, "LayerNorm");
  dx.resize(xhat_.shape());
  kernels::layer_norm_backward(dy.data(), xhat_.data(), rstd_.data(), w_, dx.data(), dw_, db_, rows,
                               dim_);
}

}  // namespace shardlab
