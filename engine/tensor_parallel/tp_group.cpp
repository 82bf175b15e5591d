#include "engine/tensor_parallel/tp_group.h"

#include "engine/comm/device_collectives.h"
#include "engine/core/error.h"

namespace shardlab {
namespace {

void reduce(const TpGroup& tp, Device& device, DeviceSpan<float> data, ReduceOp op) {
  if (tp.size == 1) return;
  SL_ENFORCE_T(InternalError, tp.comm != nullptr,
               "tensor parallelism: a tp group of {} ranks has no communicator (layers declared "
               "without one cannot run)",
               tp.size);
  DeviceCollectives(*tp.comm, device).all_reduce_async(data, op)->wait();
}

DeviceSpan<float> on_host(std::span<float> data) {
  return {DevicePtr<float>(data.data()), data.size()};
}

}  // namespace

void TpGroup::all_reduce_sum(Device& device, DeviceSpan<float> data) const {
  reduce(*this, device, data, ReduceOp::Sum);
}

void TpGroup::all_reduce_max(Device& device, DeviceSpan<float> data) const {
  reduce(*this, device, data, ReduceOp::Max);
}

void TpGroup::all_reduce_sum(std::span<float> data) const {
  reduce(*this, host_device(), on_host(data), ReduceOp::Sum);
}

void TpGroup::all_reduce_max(std::span<float> data) const {
  reduce(*this, host_device(), on_host(data), ReduceOp::Max);
}

}  // namespace shardlab
