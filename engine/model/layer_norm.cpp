#include "engine/model/layer_norm.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"
#include "engine/model/shape_util.h"

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
  const double inv_dim = 1.0 / static_cast<double>(dim_);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * dim_;
    // Two passes in double: the one-pass E[x^2] - E[x]^2 cancels badly when |mean| >> std.
    double mean = 0;
    for (int64_t j = 0; j < dim_; ++j) mean += xr[j];
    mean *= inv_dim;
    double var = 0;
    for (int64_t j = 0; j < dim_; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    var *= inv_dim;
    const float rstd = static_cast<float>(1.0 / std::sqrt(var + eps_));
    rstd_[static_cast<size_t>(r)] = rstd;
    float* hr = xhat_.data() + r * dim_;
    float* yr = y.data() + r * dim_;
    for (int64_t j = 0; j < dim_; ++j) {
      hr[j] = static_cast<float>(xr[j] - mean) * rstd;
      yr[j] = hr[j] * w_[j] + b_[j];
    }
  }
}

void LayerNorm::backward(const Tensor& dy, Tensor& dx) {
  const int64_t rows = static_cast<int64_t>(rstd_.size());
  detail::check_grad(dy, rows * dim_, dim_, "LayerNorm");
  dx.resize(xhat_.shape());
  const float inv_dim = 1.0f / static_cast<float>(dim_);
  for (int64_t r = 0; r < rows; ++r) {
    const float* dyr = dy.data() + r * dim_;
    const float* hr = xhat_.data() + r * dim_;
    float* dxr = dx.data() + r * dim_;
    // With g = dy * weight: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
    float sum_g = 0, sum_gh = 0;
    for (int64_t j = 0; j < dim_; ++j) {
      const float g = dyr[j] * w_[j];
      sum_g += g;
      sum_gh += g * hr[j];
      dw_[j] += dyr[j] * hr[j];
      db_[j] += dyr[j];
    }
    const float mean_g = sum_g * inv_dim, mean_gh = sum_gh * inv_dim;
    const float rstd = rstd_[static_cast<size_t>(r)];
    for (int64_t j = 0; j < dim_; ++j) dxr[j] = rstd * (dyr[j] * w_[j] - mean_g - hr[j] * mean_gh);
  }
}

}  // namespace shardlab
