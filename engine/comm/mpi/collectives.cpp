// The collectives of MpiCommunicator: each builds an Op (its signature for the arrival gate and
// the blocking MPI call that runs once the gate opens) and queues it on the Channel.
#include <vector>

#include "engine/comm/mpi/channel.h"
#include "engine/comm/mpi/communicator.h"
#include "engine/comm/mpi/mpi_util.h"

namespace shardlab {
namespace mpi_detail {
namespace {

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:  // the sum, divided afterwards
      return MPI_SUM;
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Min:
      return MPI_MIN;
  }
  return MPI_SUM;
}

void divide(std::span<float> data, int n) {
  const auto d = static_cast<float>(n);
  for (float& x : data) x /= d;  // as the reference computes it, so Avg is exact where Sum is
}

}  // namespace
}  // namespace mpi_detail

using mpi_detail::mpi_count;
using mpi_detail::new_op;
using mpi_detail::Op;
using mpi_detail::Signature;

namespace {

Signature signature(const CommRecord& record, int64_t count, int root, ReduceOp reduce) {
  Signature s;
  s.op = static_cast<int64_t>(record.op);
  s.count = count;
  if (record.op == CommOp::Broadcast) s.root = root;
  if (record.op == CommOp::AllReduce || record.op == CommOp::ReduceScatter)
    s.reduce = static_cast<int64_t>(reduce);
  s.seq = static_cast<int64_t>(record.seq);
  return s;
}

// Per-rank counts and displacements of chunk_range(total, n, r).
void chunks(int64_t total, int n, std::vector<int>& counts, std::vector<int>& displs) {
  counts.resize(static_cast<size_t>(n));
  displs.resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const IndexRange c = chunk_range(total, n, r);
    counts[static_cast<size_t>(r)] = static_cast<int>(c.size());
    displs[static_cast<size_t>(r)] = static_cast<int>(c.begin);
  }
}

}  // namespace

WorkHandle MpiCommunicator::do_all_reduce(std::span<float> data, const Call& call) {
  auto op = new_op(call.record, call.describe());
  const int count = mpi_count(data.size(), *op);
  op->sig = signature(call.record, count, 0, call.reduce);
  op->data = data;
  op->body = [comm = channel_->comm(), count, reduce = call.reduce, n = size()](Op& o) {
    SL_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, o.data.data(), count, MPI_FLOAT,
                               mpi_detail::mpi_op(reduce), comm));
    if (reduce == ReduceOp::Avg) mpi_detail::divide(o.data, n);
  };
  return channel_->submit(std::move(op));
}

WorkHandle MpiCommunicator::do_reduce_scatter(std::span<const float> input, std::span<float> output,
                                              const Call& call) {
  auto op = new_op(call.record, call.describe());
  const int total = mpi_count(input.size(), *op);
  std::vector<int> counts, displs;
  chunks(total, size(), counts, displs);
  op->sig = signature(call.record, total, 0, call.reduce);
  op->input = input;
  op->output = output;
  op->body = [comm = channel_->comm(), counts = std::move(counts), reduce = call.reduce,
              n = size()](Op& o) {
    SL_MPI_CHECK(MPI_Reduce_scatter(o.input.data(), o.output.data(), counts.data(), MPI_FLOAT,
                                    mpi_detail::mpi_op(reduce), comm));
    if (reduce == ReduceOp::Avg) mpi_detail::divide(o.output, n);
  };
  return channel_->submit(std::move(op));
}

WorkHandle MpiCommunicator::do_all_gather(std::span<const float> input, std::span<float> output,
                                          const Call& call) {
  auto op = new_op(call.record, call.describe());
  const int total = mpi_count(output.size(), *op);
  std::vector<int> counts, displs;
  chunks(total, size(), counts, displs);
  op->sig = signature(call.record, total, 0, ReduceOp::Sum);
  op->input = input;
  op->output = output;
  op->body = [comm = channel_->comm(), counts = std::move(counts),
              displs = std::move(displs)](Op& o) {
    SL_MPI_CHECK(MPI_Allgatherv(o.input.data(), static_cast<int>(o.input.size()), MPI_FLOAT,
                                o.output.data(), counts.data(), displs.data(), MPI_FLOAT, comm));
  };
  return channel_->submit(std::move(op));
}

WorkHandle MpiCommunicator::do_broadcast(std::span<float> data, const Call& call) {
  auto op = new_op(call.record, call.describe());
  const int count = mpi_count(data.size(), *op);
  op->sig = signature(call.record, count, call.root, ReduceOp::Sum);
  op->data = data;
  op->body = [comm = channel_->comm(), count, root = call.root](Op& o) {
    SL_MPI_CHECK(MPI_Bcast(o.data.data(), count, MPI_FLOAT, root, comm));
  };
  return channel_->submit(std::move(op));
}

WorkHandle MpiCommunicator::do_barrier(const Call& call) {
  auto op = new_op(call.record, call.describe());
  op->sig = signature(call.record, 0, 0, ReduceOp::Sum);
  // Every rank has arrived once the gate opens: that is the barrier.
  op->body = [](Op&) {};
  return channel_->submit(std::move(op));
}

}  // namespace shardlab
