#include "engine/hybrid/tensor_parallel_grad_sync.h"

#include <algorithm>

#include "engine/comm/device_collectives.h"
#include "engine/core/error.h"
#include "engine/device/device_buffer.h"

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

void TensorParallelGradSync::synchronize_grads(Device& device, DeviceSpan<float> grads) {
  if (tp_.size == 1 || replicated_ == 0) return;
  SL_ENFORCE_T(InternalError, tp_.comm != nullptr,
               "TensorParallelGradSync: tp group of {} ranks without a communicator", tp_.size);
  DeviceBuffer<float> packed(device, MemCategory::comm, replicated_);
  int64_t at = 0;
  for (const IndexRange& r : replicated_ranges_) {
    device.copy(DeviceSpan<const float>(grads.subspan(r.begin, r.size())),
                packed.span().subspan(at, r.size()));
    at += r.size();
  }
  DeviceCollectives(*tp_.comm, device).all_reduce_async(packed.span(), ReduceOp::Avg)->wait();
  at = 0;
  for (const IndexRange& r : replicated_ranges_) {
    device.copy(DeviceSpan<const float>(packed.span().subspan(at, r.size())),
                grads.subspan(r.begin, r.size()));
    at += r.size();
  }
}

std::span<const IndexRange> TensorParallelGradSync::not_counted() const {
  if (tp_.rank == 0) return {};
  return replicated_ranges_;
}

}  // namespace shardlab
