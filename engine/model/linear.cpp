#include "engine/model/linear.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"
#include "engine/model/shape_util.h"
#include "engine/model/param_init.h"

namespace shardlab {

using kernels::Trans;

Linear::Linear(int64_t in, int64_t out, bool bias) : in_(in), out_(out), bias_(bias) {
  SL_ENFORCE(in > 0 && out > 0, "Linear: sizes must be > 0, got in={} out={}", in, out);
}

void Linear::declare(ParamLayout& layout, const std::string& prefix, int block) {
  w_index_ = layout.add(prefix + "weight", {out_, in_}, block);
  if (bias_) b_index_ = layout.add(prefix + "bias", {out_}, block);
}

void Linear::bind(const ParamBinding& binding) {
  dev_ = binding.device;
  w_ = binding.param(w_index_);
  dw_ = binding.grad(w_index_);
  if (bias_) {
    b_ = binding.param(b_index_);
    db_ = binding.grad(b_index_);
  }
}

void Linear::init(Rng& rng) {
  SL_ENFORCE(w_, "Linear: init before bind");
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_));
  init_uniform(*dev_, w_, in_ * out_, rng, -bound, bound);
  if (bias_) dev_->fill(b_, out_, 0.0f);
}

void Linear::forward(const Tensor& x, Tensor& y) {
  SL_ENFORCE(w_, "Linear: forward before bind");
  const int64_t rows = detail::rows_with_last(x, in_, "Linear");
  x_.resize(x.shape(), *dev_);
  dev_->copy(x.dspan(), x_.dspan());
  y.resize(detail::with_last(x.shape(), out_), *dev_);
  if (rows == 0) return;
  dev_->gemm(Trans::No, Trans::Yes, rows, out_, in_, 1.0f, x.dev(), in_, w_, in_, 0.0f, y.dev(),
             out_);
  if (bias_) dev_->bias_add(y.dev(), b_, rows, out_);
}

int64_t Linear::add_param_grads(const Tensor& dy) {
  const int64_t rows = x_.numel() / in_;
  detail::check_grad(dy, rows * out_, out_, "Linear");
  if (rows == 0) return 0;
  // dW += dy^T x   ([out, rows] x [rows, in])
  dev_->gemm(Trans::Yes, Trans::No, out_, in_, rows, 1.0f, dy.dev(), out_, x_.dev(), in_, 1.0f,
             dw_, in_);
  if (bias_) dev_->bias_grad(dy.dev(), db_, rows, out_);
  return rows;
}

void Linear::backward(const Tensor& dy, Tensor& dx) {
  const int64_t rows = add_param_grads(dy);
  dx.resize(x_.shape(), *dev_);
  if (rows == 0) return;
  // dx = dy W   ([rows, out] x [out, in])
  dev_->gemm(Trans::No, Trans::No, rows, in_, out_, 1.0f, dy.dev(), out_, w_, in_, 0.0f, dx.dev(),
             in_);
}

void Linear::backward_params_only(const Tensor& dy, Tensor& scratch) {
  (void)scratch;
  (void)add_param_grads(dy);
}

}  // namespace shardlab
