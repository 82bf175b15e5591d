#include "engine/comm/communicator.h"

#include <string_view>

#include <algorithm>
#include <cstdint>

#include "engine/comm/flight_recorder.h"

namespace shardlab {

IndexRange chunk_range(int64_t total, int parts, int index) {
  SL_ENFORCE(parts >= 1 && index >= 0 && index < parts, "chunk {} of {} parts", index, parts);
  SL_ENFORCE(total >= 0, "negative element count {}", total);
  const int64_t base = total / parts, extra = total % parts;
  const int64_t begin = index * base + std::min<int64_t>(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

Communicator::Communicator(int rank, int size, std::string name, CommOptions options)
    : rank_(rank), size_(size), name_(std::move(name)), options_(std::move(options)) {
  SL_ENFORCE(size >= 1 && rank >= 0 && rank < size, "rank {} of a group of {}", rank, size);
  SL_ENFORCE(options_.timeout.count() > 0, "communication timeout must be > 0 ms, got {}",
             options_.timeout.count());
}

std::string Communicator::Call::describe() const {
  return fmt::format("{} on group {} (seq {})", to_string(record.op), record.group, record.seq);
}

Communicator::Call Communicator::make_call(CommOp op, int64_t bytes, int peer, int tag,
                                           CommSubject subject) {
  Call c;
  c.record.subject = subject;
  c.record.op = op;
  c.record.group = name_;
  c.record.rank = rank_;
  c.record.group_size = size_;
  const bool p2p = op == CommOp::Send || op == CommOp::Recv;
  c.record.seq = p2p ? p2p_seq_++ : collective_seq_++;
  c.record.bytes = bytes;
  c.record.peer = peer;
  c.record.tag = tag;
  c.record.start = Clock::now();
  if (options_.flight_recorder) c.record.flight_id = options_.flight_recorder->issued(c.record);
  return c;
}

template <typename F>
WorkHandle Communicator::issue(const Call& call, F&& f) {
  if (!options_.flight_recorder) return f();
  try {
    return f();
  } catch (const std::exception& e) {
    // Refused before it got under way (bad arguments, a broken communicator); if the backend
    // already reported the failure, this only adds its message.
    options_.flight_recorder->failed(call.record.flight_id, FlightRecorder::State::Failed,
                                     e.what());
    throw;
  }
}

void Communicator::report(CommRecord record, bool ok) const {
  record.end = Clock::now();
  record.ok = ok;
  if (ok && record.wait < 0 && std::string_view(backend()) != "nccl") {
    if (record.op == CommOp::Recv) {
      // A receiver cannot tell waiting for the sender from the transfer (communicator.h).
      record.wait = record.seconds();
      record.last = record.peer;
    } else if (record.group_size == 1 && record.op != CommOp::Send) {
      record.wait = 0;  // nobody to wait for
      record.last = -1;
    }
  }
  if (options_.flight_recorder) {
    if (ok)
      options_.flight_recorder->completed(record.flight_id, record.end);
    else
      options_.flight_recorder->failed(record.flight_id, FlightRecorder::State::Failed, {},
                                       record.end);
  }
  if (options_.sink) options_.sink->on_record(record);
}

CommOptions world_rank_options(const CommOptions& options, int rank) {
  CommOptions mine = options;
  if (mine.flight_recorder) {
    if (mine.flight_recorder->rank() < 0) mine.flight_recorder->set_rank(rank);
  } else if (mine.flight_capacity > 0) {
    mine.flight_recorder = std::make_shared<FlightRecorder>(
        FlightRecorderOptions{.capacity = mine.flight_capacity, .rank = rank});
  }
  return mine;
}

namespace {

// The same kind of error with `suffix` appended to its message (TimeoutError and CommError only;
// anything else is returned as it is).
std::exception_ptr with_suffix(const std::exception_ptr& error, const std::string& suffix) {
  try {
    std::rethrow_exception(error);
  } catch (const TimeoutError& e) {
    return std::make_exception_ptr(TimeoutError(e.what() + suffix, e.where()));
  } catch (const CommError& e) {
    return std::make_exception_ptr(CommError(e.what() + suffix, e.where()));
  } catch (...) {
  }
  return error;
}

}  // namespace

std::exception_ptr Communicator::report_failure(CommRecord record,
                                                std::exception_ptr error) const noexcept {
  record.end = Clock::now();
  record.ok = false;
  try {
    if (options_.flight_recorder && error) {
      FlightRecorder& fr = *options_.flight_recorder;
      std::string what = "an unknown exception";
      bool timeout = false, comm = false;
      try {
        std::rethrow_exception(error);
      } catch (const TimeoutError& e) {
        what = e.what(), timeout = true;
      } catch (const CommError& e) {
        what = e.what(), comm = true;
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      fr.failed(record.flight_id,
                timeout ? FlightRecorder::State::TimedOut : FlightRecorder::State::Failed, what,
                record.end);
      if ((timeout || comm) && !options_.flight_dir.empty()) {
        std::string suffix;
        try {
          const std::string path = fr.dump(options_.flight_dir);
          suffix = fmt::format("; flight record (last {} operations of rank {}) written to {}",
                               std::min<uint64_t>(fr.total(), fr.capacity()), fr.rank(), path);
        } catch (const std::exception& e) {
          suffix = fmt::format("; the flight record could not be written: {}", e.what());
        }
        error = with_suffix(error, suffix);
      }
    }
  } catch (...) {  // out of memory while describing the failure: the error itself still stands
  }
  try {
    if (options_.sink) options_.sink->on_record(record);
  } catch (...) {  // the operation has failed already; its error is the one to throw
  }
  return error;
}

namespace {

constexpr int64_t kF = sizeof(float);

// Whether two buffers share memory (compared as addresses; device pointers are never read).
bool overlap(std::span<const float> a, std::span<const float> b) {
  if (a.empty() || b.empty()) return false;
  const auto a0 = reinterpret_cast<uintptr_t>(a.data()), b0 = reinterpret_cast<uintptr_t>(b.data());
  return a0 < b0 + b.size_bytes() && b0 < a0 + a.size_bytes();
}

}  // namespace

WorkHandle Communicator::all_reduce_async(std::span<float> data, ReduceOp op, CommSubject subject) {
  Call c = make_call(CommOp::AllReduce, static_cast<int64_t>(data.size()) * kF, -1, 0, subject);
  c.reduce = op;
  return issue(c, [&] { return do_all_reduce(data, c); });
}

WorkHandle Communicator::reduce_scatter_async(std::span<const float> input, std::span<float> output,
                                              ReduceOp op, CommSubject subject) {
  const auto total = static_cast<int64_t>(input.size());
  const IndexRange mine = chunk_range(total, size_, rank_);
  SL_ENFORCE(static_cast<int64_t>(output.size()) == mine.size(),
             "reduce_scatter on group {}: rank {} owns {} of the {} input elements, but the output "
             "holds {}",
             name_, rank_, mine.size(), total, output.size());
  SL_ENFORCE(!overlap(input, output),
             "reduce_scatter on group {}: input and output overlap; pass separate buffers", name_);
  Call c = make_call(CommOp::ReduceScatter, total * kF, -1, 0, subject);
  c.reduce = op;
  return issue(c, [&] { return do_reduce_scatter(input, output, c); });
}

WorkHandle Communicator::all_gather_async(std::span<const float> input, std::span<float> output,
                                          CommSubject subject) {
  const auto total = static_cast<int64_t>(output.size());
  const IndexRange mine = chunk_range(total, size_, rank_);
  SL_ENFORCE(static_cast<int64_t>(input.size()) == mine.size(),
             "all_gather on group {}: rank {} owns {} of the {} output elements, but the input "
             "holds {}",
             name_, rank_, mine.size(), total, input.size());
  SL_ENFORCE(!overlap(input, output),
             "all_gather on group {}: input and output overlap; pass separate buffers", name_);
  const Call c = make_call(CommOp::AllGather, total * kF, -1, 0, subject);
  return issue(c, [&] { return do_all_gather(input, output, c); });
}

WorkHandle Communicator::broadcast_async(std::span<float> data, int root) {
  SL_ENFORCE(root >= 0 && root < size_,
             "broadcast on group {}: root {} is not a rank of a group of {}", name_, root, size_);
  Call c = make_call(CommOp::Broadcast, static_cast<int64_t>(data.size()) * kF, root, 0);
  c.root = root;
  return issue(c, [&] { return do_broadcast(data, c); });
}

WorkHandle Communicator::barrier_async() {
  const Call c = make_call(CommOp::Barrier, 0, -1, 0);
  return issue(c, [&] { return do_barrier(c); });
}

WorkHandle Communicator::send_async(std::span<const float> data, int peer, int tag) {
  SL_ENFORCE(peer >= 0 && peer < size_ && peer != rank_,
             "send on group {}: peer {} is not another rank of a group of {}", name_, peer, size_);
  SL_ENFORCE(tag >= 0, "send on group {}: tag must be >= 0, got {}", name_, tag);
  const Call c = make_call(CommOp::Send, static_cast<int64_t>(data.size()) * kF, peer, tag);
  return issue(c, [&] { return do_send(data, c); });
}

WorkHandle Communicator::recv_async(std::span<float> data, int peer, int tag) {
  SL_ENFORCE(peer >= 0 && peer < size_ && peer != rank_,
             "recv on group {}: peer {} is not another rank of a group of {}", name_, peer, size_);
  SL_ENFORCE(tag >= 0, "recv on group {}: tag must be >= 0, got {}", name_, tag);
  const Call c = make_call(CommOp::Recv, static_cast<int64_t>(data.size()) * kF, peer, tag);
  return issue(c, [&] { return do_recv(data, c); });
}

std::unique_ptr<Communicator> Communicator::split(int color, int key, const std::string& name) {
  SL_ENFORCE(!name.empty(), "split of group {}: the new group needs a name", name_);
  // A split is a collective: it takes a sequence number so traces line up across ranks.
  ++collective_seq_;
  return do_split(color, key, name);
}

}  // namespace shardlab
