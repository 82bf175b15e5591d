#include "engine/hybrid/dp_sync.h"

#include <algorithm>

#include "engine/core/error.h"

namespace shardlab {

namespace {

// Sum of x^2 over flat positions [begin, begin + n) of `values` seen from `offset` (values[i]
// sits at flat position offset + i... for a packed shard, the flat position it came from), minus
// the positions inside `skip` (sorted, disjoint).
double square_sum_skipping(const float* values, int64_t flat_begin, int64_t n,
                           std::span<const IndexRange> skip) {
  double s = 0;
  int64_t at = flat_begin;
  const int64_t end = flat_begin + n;
  for (const IndexRange& r : skip) {
    if (r.end <= at) continue;
    if (r.begin >= end) break;
    for (int64_t i = at; i < std::max(at, r.begin); ++i) {
      const double v = values[i - flat_begin];
      s += v * v;
    }
    at = std::max(at, std::min(end, r.end));
  }
  for (int64_t i = at; i < end; ++i) {
    const double v = values[i - flat_begin];
    s += v * v;
  }
  return s;
}

}  // namespace

DataParallelSync::DataParallelSync(Communicator& dp, std::string strategy, int64_t total,
                                   int64_t bucket_elements)
    : dp_(dp), strategy_(std::move(strategy)) {
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
  optimizer.attach({0, owned_elements()});
}

int64_t DataParallelSync::owned_elements() const {
  return strategy_ == "ddp" ? layout_.total() : layout_.shard_size();
}

void DataParallelSync::pack(std::span<const float> padded, std::span<float> shard) const {
  for_each_chunk([&](int64_t flat, int64_t offset, int64_t n) {
    std::copy_n(padded.begin() + flat, n, shard.begin() + offset);
  });
}

void DataParallelSync::reduce(std::span<float> grads) {
  SL_ENFORCE_T(InternalError, static_cast<int64_t>(grads.size()) == layout_.padded_total(),
               "DataParallelSync: {} gradients, the layout has {}", grads.size(),
               layout_.padded_total());
  std::vector<WorkHandle> pending;
  if (strategy_ == "zero2" && grad_shard_.empty())
    grad_shard_ = make_buffer(MemCategory::grads, layout_.shard_size());
  for (int32_t i = 0; i < static_cast<int32_t>(layout_.units().size()); ++i) {
    const ShardUnit& u = layout_.units()[static_cast<size_t>(i)];
    std::span<float> g = grads.subspan(u.padded_begin, u.padded);
    const CommSubject subject{CommArray::grads, i};
    if (strategy_ == "zero2")
      pending.push_back(dp_.reduce_scatter_async(
          g, std::span<float>(grad_shard_).subspan(u.shard_offset, u.chunk), ReduceOp::Avg,
          subject));
    else
      pending.push_back(dp_.all_reduce_async(g, ReduceOp::Avg, subject));
  }
  for (auto& h : pending) h->wait();
}

double DataParallelSync::owned_square_sum(std::span<const float> grads,
                                          std::span<const IndexRange> skip) const {
  if (strategy_ == "ddp")
    return dp_.rank() == 0 ? square_sum_skipping(grads.data(), 0, layout_.total(), skip) : 0.0;
  double s = 0;
  for_each_chunk([&](int64_t flat, int64_t offset, int64_t n) {
    const float* values = strategy_ == "zero2" ? grad_shard_.data() + offset : grads.data() + flat;
    s += square_sum_skipping(values, flat, n, skip);
  });
  return s;
}

void DataParallelSync::scale(std::span<float> grads, float factor) {
  if (strategy_ == "zero2") {
    for (float& g : grad_shard_) g *= factor;
    return;
  }
  for_each_chunk([&](int64_t flat, int64_t, int64_t n) {
    for (int64_t i = 0; i < n; ++i) grads[static_cast<size_t>(flat + i)] *= factor;
  });
}

void DataParallelSync::update(Optimizer& optimizer, std::span<float> params,
                              std::span<const float> grads, double lr) {
  if (strategy_ == "ddp") {
    optimizer.step(params.first(static_cast<size_t>(layout_.total())),
                   grads.first(static_cast<size_t>(layout_.total())), lr);
    return;
  }
  const int64_t n = layout_.shard_size();
  Buffer shard = make_buffer(MemCategory::comm, n);
  pack(params, shard);
  if (strategy_ == "zero1") {
    Buffer g = make_buffer(MemCategory::comm, n);
    pack(grads, g);
    optimizer.step(shard, g, lr);
  } else {
    optimizer.step(shard, grad_shard_, lr);
  }
  std::vector<WorkHandle> gathers;
  for (int32_t i = 0; i < static_cast<int32_t>(layout_.units().size()); ++i) {
    const ShardUnit& u = layout_.units()[static_cast<size_t>(i)];
    gathers.push_back(
        dp_.all_gather_async(std::span<const float>(shard).subspan(u.shard_offset, u.chunk),
                             params.subspan(u.padded_begin, u.padded), {CommArray::params, i}));
  }
  for (auto& h : gathers) h->wait();
}

}  // namespace shardlab
