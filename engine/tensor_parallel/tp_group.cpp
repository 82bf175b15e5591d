#include "engine/tensor_parallel/tp_group.h"

#include "engine/core/error.h"

namespace shardlab {
namespace {

void reduce(const TpGroup& tp, std::span<float> data, ReduceOp op) {
  if (tp.size == 1) return;
  SL_ENFORCE_T(InternalError, tp.comm != nullptr,
               "tensor parallelism: a tp group of {} ranks has no communicator (layers declared "
               "without one cannot run)",
               tp.size);
  tp.comm->all_reduce(data, op);
}

}  // namespace

void TpGroup::all_reduce_sum(std::span<float> data) const {
  reduce(*this, data, ReduceOp::Sum);
}

void TpGroup::all_reduce_max(std::span<float> data) const {
  reduce(*this, data, ReduceOp::Max);
}

}  // namespace shardlab
