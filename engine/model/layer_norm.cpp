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
  dev_ = binding.device;
  w_ = binding.param(w_index_);
  dw_ = binding.grad(w_index_);
  b_ = binding.param(b_index_);
  db_ = binding.grad(b_index_);
}

void LayerNorm::init(Rng& rng) {
  (void)rng;
  SL_ENFORCE(w_, "LayerNorm: init before bind");
  dev_->fill(w_, dim_, 1.0f);
  dev_->fill(b_, dim_, 0.0f);
}

void LayerNorm::forward(const Tensor& x, Tensor& y) {
  SL_ENFORCE(w_, "LayerNorm: forward before bind");
  const int64_t rows = detail::rows_with_last(x, dim_, "LayerNorm");
  y.resize(x.shape(), *dev_);
  xhat_.resize(x.shape(), *dev_);
  rstd_.resize({rows}, *dev_);
  dev_->layer_norm_forward(x.dev(), w_, b_, y.dev(), xhat_.dev(), rstd_.dev(), rows, dim_, eps_);
}

void LayerNorm::backward(const Tensor& dy, Tensor& dx) {
  const int64_t rows = rstd_.numel();
  detail::check_grad(dy, rows * dim_, dim_, "LayerNorm");
  dx.resize(xhat_.shape(), *dev_);
  dev_->layer_norm_backward(dy.dev(), xhat_.dev(), rstd_.dev(), w_, dx.dev(), dw_, db_, rows, dim_);
}

}  // namespace shardlab
