#include "engine/comm/comm_record.h"

namespace shardlab {

const char* to_string(CommArray array) {
  switch (array) {
    case CommArray::params:
      return "params";
    case CommArray::grads:
      return "grads";
    default:
      return "unknown";
  }
}

const char* to_string(CommOp op) {
  switch (op) {
    case CommOp::AllReduce:
      return "all_reduce";
    case CommOp::ReduceScatter:
      return "reduce_scatter";
    case CommOp::AllGather:
      return "all_gather";
    case CommOp::Broadcast:
      return "broadcast";
    case CommOp::Barrier:
      return "barrier";
    case CommOp::Send:
      return "send";
    case CommOp::Recv:
      return "recv";
  }
  return "?";
}

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Avg:
      return "avg";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
  }
  return "?";
}

double bus_factor(CommOp op, int n) {
  if (n <= 1)
    return op == CommOp::AllReduce || op == CommOp::ReduceScatter || op == CommOp::AllGather ? 0.0
                                                                                             : 1.0;
  switch (op) {
    case CommOp::AllReduce:
      return 2.0 * (n - 1) / n;
    case CommOp::ReduceScatter:
    case CommOp::AllGather:
      return static_cast<double>(n - 1) / n;
    default:
      return 1.0;
  }
}

double CommRecord::seconds() const {
  return std::chrono::duration<double>(end - start).count();
}

double CommRecord::algbw_gbs() const {
  const double s = seconds();
  return s > 0 ? static_cast<double>(bytes) / s / 1e9 : 0.0;
}

double CommRecord::busbw_gbs() const {
  return algbw_gbs() * bus_factor(op, group_size);
}

void MemorySink::on_record(const CommRecord& record) {
  std::lock_guard lock(mu_);
  records_.push_back(record);
}

std::vector<CommRecord> MemorySink::records() const {
  std::lock_guard lock(mu_);
  return records_;
}

void MemorySink::clear() {
  std::lock_guard lock(mu_);
  records_.clear();
}

}  // namespace shardlab
