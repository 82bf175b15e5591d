#include "engine/hybrid/tensor_parallel_grad_sync.h"

#include <algorithm>

#include "engine/core/error.h"

namespace shardlab {

TensorParallelGradSync::TensorParallelGradSync(TpGroup tp, const ParamLayout& local,
                                               const std::vector<ParamSlice>& slices)
    : tp_(tp) {
  for (const ParamSlice& s : slices) {
    if (!s.replicated) continue;
    const ParamInfo& p = local[s.local];
    if (!replicated_ranges_.empty() && replicated_ranges_.back().end == p.offset)
      replicated_ranges_.back().end += p.numel;  // adjacent: one range
    else
      replicated_ranges_.push_back({p.offset, p.offset + p.numel});
    replicated_ += p.numel;
  }
}

void TensorParallelGradSync::synchronize_grads(std::span<float> grads) {
  if (tp_.size == 1 || replicated_ == 0) return;
  SL_ENFORCE_T(InternalError, tp_.comm != nullptr,
               "TensorParallelGradSync: tp group of {} ranks without a communicator", tp_.size);
  Buffer packed = make_buffer(MemCategory::comm, replicated_);
  int64_t at = 0;
  for (const IndexRange& r : replicated_ranges_) {
    std::copy(grads.begin() + r.begin, grads.begin() + r.end, packed.begin() + at);
    at += r.size();
  }
  tp_.comm->all_reduce(packed, ReduceOp::Avg);
  at = 0;
  for (const IndexRange& r : replicated_ranges_) {
    std::copy_n(packed.begin() + at, r.size(), grads.begin() + r.begin);
    at += r.size();
  }
}

std::span<const IndexRange> TensorParallelGradSync::not_counted() const {
  if (tp_.rank == 0) return {};
  return replicated_ranges_;
}

}  // namespace shardlab
