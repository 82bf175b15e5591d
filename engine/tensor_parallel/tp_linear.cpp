#include "engine/tensor_parallel/tp_linear.h"

#include "engine/core/error.h"

namespace shardlab {

ColumnParallelLinear::ColumnParallelLinear(int64_t in, int64_t out_local, bool bias, TpGroup tp)
    : local_(in, out_local, bias), tp_(tp) {}

void ColumnParallelLinear::declare(ParamLayout& layout, const std::string& prefix, int block) {
  local_.declare(layout, prefix, block);
}

void ColumnParallelLinear::bind(const ParamBinding& binding) {
  local_.bind(binding);
}

void ColumnParallelLinear::forward(const Tensor& x, Tensor& y) {
  local_.forward(x, y);
}

void ColumnParallelLinear::backward(const Tensor& dy, Tensor& dx) {
  // Each rank's dx holds its own output units' share; the input was replicated, so its gradient
  // is the sum of the shares.
  local_.backward(dy, dx);
  tp_.all_reduce_sum(dx.device(), dx.dspan());
}

// The product is a bias-free Linear over this rank's input features; the bias is added once,
// after the sum, so it is declared here rather than in the Linear (same name and order).
RowParallelLinear::RowParallelLinear(int64_t in_local, int64_t out, bool bias, TpGroup tp)
    : local_(in_local, out, /*bias=*/false), out_(out), bias_(bias), tp_(tp) {}

void RowParallelLinear::declare(ParamLayout& layout, const std::string& prefix, int block) {
  local_.declare(layout, prefix, block);
  if (bias_) b_index_ = layout.add(prefix + "bias", {out_}, block);
}

void RowParallelLinear::bind(const ParamBinding& binding) {
  local_.bind(binding);
  dev_ = binding.device;
  if (bias_) {
    b_ = binding.param(b_index_);
    db_ = binding.grad(b_index_);
  }
}

void RowParallelLinear::forward(const Tensor& x, Tensor& y) {
  SL_ENFORCE(dev_ != nullptr && (!bias_ || b_), "RowParallelLinear: forward before bind");
  local_.forward(x, y);
  tp_.all_reduce_sum(*dev_, y.dspan());
  if (!bias_) return;
  dev_->bias_add(y.dev(), b_, y.numel() / out_, out_);
}

void RowParallelLinear::backward(const Tensor& dy, Tensor& dx) {
  local_.backward(dy, dx);  // checks dy against the last output
  // dy is replicated, so every rank adds the same (whole) bias gradient.
  if (!bias_) return;
  dev_->bias_grad(dy.dev(), db_, dy.numel() / out_, out_);
}

}  // namespace shardlab
