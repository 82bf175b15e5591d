#include "engine/hybrid/dp_sync.h"

#include <algorithm>

#include "engine/core/error.h"

namespace shardlab {

namespace {

// Calls f(first, count) for the runs of flat positions [flat_begin, flat_begin + n) outside the
// ranges in `skip` (sorted, disjoint), in increasing order; `first` counts from flat_begin.
template <class F>
void for_each_unskipped(int64_t flat_begin, int64_t n, std::span<const IndexRange> skip, F&& f) {
  int64_t at = flat_begin;
  const int64_t end = flat_begin + n;
  for (const IndexRange& r : skip) {
    if (r.end <= at) continue;
    if (r.begin >= end) break;
    if (r.begin > at) f(at - flat_begin, r.begin - at);
    at = std::max(at, std::min(end, r.end));
  }
  if (at < end) f(at - flat_begin, end - at);
}

}  // namespace

DataParallelSync::DataParallelSync(Communicator& dp, Device& device, std::string strategy,
                                   int64_t total, int64_t bucket_elements)
    : dp_(dp), device_(device), collectives_(dp, device), strategy_(std::move(strategy)) {
  SL_ENFORCE(strategy_ == "ddp" || strategy_ == "zero1" || strategy_ == "zero2",
             "parallel.strategy: '{}' cannot run the data-parallel dimension of a pp x tp x dp "
             "job (expected ddp, zero1 or zero2)",
             strategy_);
  // DDP keeps everything whole: one "rank" owns every bucket, so nothing is padded.
  layout_ = ShardLayout::buckets(total, strategy_ == "ddp" ? 1 : dp.size(), bucket_elements);
}

template <class F>
void DataParallelSync::for_each_chunk(F&& f) const {
  const int me = strategy_ == "ddp" ? 0 : dp_.rank();
  for (int i = 0; i < static_cast<int>(layout_.units().size()); ++i) {
    const ShardUnit& u = layout_.units()[static_cast<size_t>(i)];
    f(u.padded_begin + layout_.chunk(i, me).begin, u.shard_offset, u.chunk);
  }
}

void DataParallelSync::attach(Optimizer& optimizer) const {
  optimizer.attach({0, owned_elements()}, device_);
}

int64_t DataParallelSync::owned_elements() const {
  return strategy_ == "ddp" ? layout_.total() : layout_.shard_size();
}

void DataParallelSync::pack(DeviceSpan<const float> padded, DeviceSpan<float> shard) {
  for_each_chunk([&](int64_t flat, int64_t offset, int64_t n) {
    device_.copy(padded.subspan(flat, n), shard.subspan(offset, n));
  });
}

void DataParallelSync::reduce(DeviceSpan<float> grads) {
  SL_ENFORCE_T(InternalError, static_cast<int64_t>(grads.size()) == layout_.padded_total(),
               "DataParallelSync: {} gradients, the layout has {}", grads.size(),
               layout_.padded_total());
  std::vector<WorkHandle> pending;
  if (strategy_ == "zero2" && grad_shard_.empty())
    grad_shard_ = DeviceBuffer<float>(device_, MemCategory::grads, layout_.shard_size());
  for (int32_t i = 0; i < static_cast<int32_t>(layout_.units().size()); ++i) {
    const ShardUnit& u = layout_.units()[static_cast<size_t>(i)];
    DeviceSpan<float> g = grads.subspan(u.padded_begin, u.padded);
    const CommSubject subject{CommArray::grads, i};
    if (strategy_ == "zero2")
      pending.push_back(collectives_.reduce_scatter_async(
          g, grad_shard_.span().subspan(u.shard_offset, u.chunk), ReduceOp::Avg, subject));
    else
      pending.push_back(collectives_.all_reduce_async(g, ReduceOp::Avg, subject));
  }
  for (auto& h : pending) h->wait();
}

double DataParallelSync::owned_square_sum(DeviceSpan<const float> grads,
                                          std::span<const IndexRange> skip) {
  double s = 0;
  if (strategy_ == "ddp") {
    if (dp_.rank() != 0) return 0.0;
    for_each_unskipped(0, layout_.total(), skip, [&](int64_t first, int64_t count) {
      s += device_.squared_norm(grads.subspan(first, count));
    });
    return s;
  }
  for_each_chunk([&](int64_t flat, int64_t offset, int64_t n) {
    const DeviceSpan<const float> values =
        strategy_ == "zero2" ? DeviceSpan<const float>(grad_shard_.span()).subspan(offset, n)
                             : grads.subspan(flat, n);
    for_each_unskipped(flat, n, skip, [&](int64_t first, int64_t count) {
      s += device_.squared_norm(values.subspan(first, count));
    });
  });
  return s;
}

void DataParallelSync::scale(DeviceSpan<float> grads, float factor) {
  if (strategy_ == "zero2") {
    device_.scale(grad_shard_.data(), grad_shard_.size(), factor);
    return;
  }
  for_each_chunk(
      [&](int64_t flat, int64_t, int64_t n) { device_.scale(grads.data() + flat, n, factor); });
}

void DataParallelSync::update(Optimizer& optimizer, DeviceSpan<float> params,
                              DeviceSpan<const float> grads, double lr) {
  if (strategy_ == "ddp") {
    optimizer.step(params.first(layout_.total()), grads.first(layout_.total()), lr);
    return;
  }
  const int64_t n = layout_.shard_size();
  DeviceBuffer<float> shard(device_, MemCategory::comm, n);
  pack(params, shard.span());
  if (strategy_ == "zero1") {
    DeviceBuffer<float> g(device_, MemCategory::comm, n);
    pack(grads, g.span());
    optimizer.step(shard.span(), g.span(), lr);
  } else {
    optimizer.step(shard.span(), grad_shard_.span(), lr);
  }
  std::vector<WorkHandle> gathers;
  for (int32_t i = 0; i < static_cast<int32_t>(layout_.units().size()); ++i) {
    const ShardUnit& u = layout_.units()[static_cast<size_t>(i)];
    gathers.push_back(collectives_.all_gather_async(
        DeviceSpan<const float>(shard.span()).subspan(u.shard_offset, u.chunk),
        params.subspan(u.padded_begin, u.padded), {CommArray::params, i}));
  }
  for (auto& h : gathers) h->wait();
}

}  // namespace shardlab
