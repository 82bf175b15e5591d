#include "engine/tensor_parallel/tp_embedding.h"

#include <limits>

#include "engine/core/error.h"
#include "engine/model/embedding.h"
#include "engine/model/shape_util.h"

namespace shardlab {

VocabParallelEmbedding::VocabParallelEmbedding(int64_t vocab, int64_t context, int64_t dim,
                                               TpGroup tp)
    : vocab_(vocab), context_(context), dim_(dim), tp_(tp), rows_(tp.part(vocab)) {
  SL_ENFORCE(vocab > 0 && context > 0 && dim > 0,
             "VocabParallelEmbedding: sizes must be > 0, got vocab={} context={} dim={}", vocab,
             context, dim);
  SL_ENFORCE(vocab <= std::numeric_limits<int32_t>::max(),
             "VocabParallelEmbedding: {} rows exceed the 32-bit ids of the kernels", vocab);
}

void VocabParallelEmbedding::declare(ParamLayout& layout, const std::string& prefix, int block) {
  tok_index_ = layout.add(prefix + "tok.weight", {rows_.size(), dim_}, block);
  pos_index_ = layout.add(prefix + "pos.weight", {context_, dim_}, block);
}

void VocabParallelEmbedding::bind(const ParamBinding& binding) {
  dev_ = binding.device;
  if (device_ids_.device() != dev_) device_ids_.bind(*dev_, MemCategory::activations);
  tok_ = binding.param(tok_index_);
  dtok_ = binding.grad(tok_index_);
  pos_ = binding.param(pos_index_);
  dpos_ = binding.grad(pos_index_);
}

void VocabParallelEmbedding::forward(const Tensor& x, Tensor& y) {
  SL_ENFORCE(dev_ != nullptr && pos_, "VocabParallelEmbedding: forward before bind");
  SL_ENFORCE(x.rank() == 2, "VocabParallelEmbedding: expected token ids [B, T], got shape {}",
             to_string(x.shape()));
  const int64_t T = x.dim(1), n = x.numel();
  SL_ENFORCE(T <= context_, "VocabParallelEmbedding: sequence length {} exceeds context {}", T,
             context_);
  // The ids are checked on the host (and kept there: a device may group them for the backward).
  // Every rank sees the same ids, so a bad one fails on all of them before the all-reduce.
  const std::vector<float> host = x.to_host();
  ids_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    ids_[static_cast<size_t>(i)] = static_cast<int32_t>(
        checked_token_id(host[static_cast<size_t>(i)], vocab_, "VocabParallelEmbedding"));
  device_ids_.resize(n);
  dev_->copy_from_host(std::span<const int32_t>(ids_), device_ids_.span());
  x_shape_ = x.shape();
  y.resize({x.dim(0), T, dim_}, *dev_);
  // Rows of ids held elsewhere are written as zeros.
  dev_->range_embedding_forward(device_ids_.data(), tok_, rows_.begin, rows_.end, y.dev(), n, dim_);
  tp_.all_reduce_sum(*dev_, y.dspan());     // one rank wrote each row, the others zeros: exact
  for (int64_t b = 0; b < x.dim(0); ++b) {  // y[b, t] += pos[t]
    const DevicePtr<float> yb = y.dev() + b * T * dim_;
    dev_->add(yb, pos_, yb, T * dim_);
  }
}

void VocabParallelEmbedding::backward(const Tensor& dy, Tensor& dx) {
  const auto n = static_cast<int64_t>(ids_.size());
  detail::check_grad(dy, n * dim_, dim_, "VocabParallelEmbedding");
  const int64_t T = n > 0 ? x_shape_[1] : 1;
  dev_->range_embedding_backward(device_ids_.data(), ids_, dy.dev(), rows_.begin, rows_.end, dtok_,
                                 dpos_, n, T, dim_);
  dx.resize(x_shape_, *dev_);
  dx.zero();
}

}  // namespace shardlab
