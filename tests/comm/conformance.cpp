#include "tests/comm/conformance.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace shardlab::conformance {

void expect_equal(const Communicator& comm, const std::string& what, int64_t count,
                  std::span<const float> got, std::span<const float> want) {
  if (got.size() != want.size())
    throw ConformanceFailure(fmt::format("{} count {} on {} rank {}: {} elements, expected {}",
                                         what, count, comm.name(), comm.rank(), got.size(),
                                         want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    if (!(got[i] == want[i]) &&
        !(std::abs(got[i] - want[i]) <= 1e-6f * std::max(1.0f, std::abs(want[i]))))
      throw ConformanceFailure(
          fmt::format("{} count {} on {} ({} ranks) rank {}: element {} is {}, expected {}", what,
                      count, comm.name(), comm.size(), comm.rank(), i, got[i], want[i]));
}

float contribution(int rank, int64_t i) {
  return static_cast<float>((rank + 1) * ((i % 7) - 3));
}

float reduced(ReduceOp op, int n, int64_t i) {
  const auto k = static_cast<float>((i % 7) - 3);
  const float sum = k * static_cast<float>(n * (n + 1) / 2);
  switch (op) {
    case ReduceOp::Sum:
      return sum;
    case ReduceOp::Avg:
      return sum / static_cast<float>(n);
    case ReduceOp::Max:
      return k >= 0 ? k * static_cast<float>(n) : k;
    case ReduceOp::Min:
      return k >= 0 ? k : k * static_cast<float>(n);
  }
  return 0;
}

const std::vector<int64_t>& sweep_counts() {
  static const std::vector<int64_t> counts = {0, 1, 2, 3, 7, 13, 64, 97, 1000, 4099, 65536, 65537};
  return counts;
}

namespace {

class HostBuffer final : public Buffer {
 public:
  explicit HostBuffer(const std::vector<float>& values) : data_(values) {}
  std::span<float> span() override { return data_; }
  std::vector<float> read() const override { return data_; }

 private:
  std::vector<float> data_;
};

class HostBuffers final : public BufferFactory {
 public:
  std::unique_ptr<Buffer> make(const std::vector<float>& values) const override {
    return std::make_unique<HostBuffer>(values);
  }
};

std::unique_ptr<Buffer> make(const Backend& backend, const std::vector<float>& values) {
  return backend.buffers->make(values);
}

std::unique_ptr<Buffer> filled(const Backend& backend, int64_t count, float value) {
  return make(backend, std::vector<float>(static_cast<size_t>(count), value));
}

// contribution(rank, i + shift) for i in [0, count).
std::vector<float> contributions(int rank, int64_t count, int64_t shift = 0) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = contribution(rank, i + shift);
  return v;
}

// reduced(op, n, i + shift) for i in [0, count).
std::vector<float> reductions(ReduceOp op, int n, int64_t count, int64_t shift = 0) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = reduced(op, n, i + shift);
  return v;
}

// Ring message `which` (0 or 1) from rank `from`: the second is the first reversed and shifted,
// so the two can never be taken for each other.
std::vector<float> ring_message(int from, int which, int64_t count) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    v[static_cast<size_t>(i)] = static_cast<float>(from * 1000 + (i % 997));
  if (which == 1) {
    std::reverse(v.begin(), v.end());
    for (float& x : v) x += 0.5f;
  }
  return v;
}

}  // namespace

const BufferFactory& host_buffers() {
  static const HostBuffers factory;
  return factory;
}

void check_all_reduce(Communicator& comm, int64_t count, ReduceOp op, const Backend& backend) {
  auto data = make(backend, contributions(comm.rank(), count));
  comm.all_reduce(data->span(), op);
  expect_equal(comm, fmt::format("all_reduce({})", to_string(op)), count, data->read(),
               reductions(op, comm.size(), count));
}

void check_reduce_scatter(Communicator& comm, int64_t count, ReduceOp op, const Backend& backend) {
  auto input = make(backend, contributions(comm.rank(), count));
  const IndexRange mine = chunk_range(count, comm.size(), comm.rank());
  auto output = filled(backend, mine.size(), -99.0f);
  std::vector<float> want;
  for (int64_t i = mine.begin; i < mine.end; ++i) want.push_back(reduced(op, comm.size(), i));
  comm.reduce_scatter(input->span(), output->span(), op);
  expect_equal(comm, fmt::format("reduce_scatter({})", to_string(op)), count, output->read(), want);
}

void check_all_gather(Communicator& comm, int64_t count, const Backend& backend) {
  // Element i is owned by the rank whose chunk holds it: its value names index and owner.
  auto value = [&](int64_t i, int owner) { return static_cast<float>((i % 4096) + 10000 * owner); };
  const IndexRange mine = chunk_range(count, comm.size(), comm.rank());
  std::vector<float> in, want;
  for (int64_t i = mine.begin; i < mine.end; ++i) in.push_back(value(i, comm.rank()));
  for (int r = 0; r < comm.size(); ++r) {
    const IndexRange c = chunk_range(count, comm.size(), r);
    for (int64_t i = c.begin; i < c.end; ++i) want.push_back(value(i, r));
  }
  auto input = make(backend, in);
  auto output = filled(backend, count, -1.0f);
  comm.all_gather(input->span(), output->span());
  expect_equal(comm, "all_gather", count, output->read(), want);
}

void check_broadcast(Communicator& comm, int64_t count, int root, const Backend& backend) {
  std::vector<float> want(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    want[static_cast<size_t>(i)] = static_cast<float>((i % 11) + 100 * root);
  auto data = comm.rank() == root ? make(backend, want) : filled(backend, count, -7.0f);
  comm.broadcast(data->span(), root);
  expect_equal(comm, fmt::format("broadcast(root {})", root), count, data->read(), want);
}

void check_send_recv_ring(Communicator& comm, int64_t count, const Backend& backend) {
  if (comm.size() < 2) return;
  const int next = (comm.rank() + 1) % comm.size();
  const int prev = (comm.rank() + comm.size() - 1) % comm.size();
  auto out1 = make(backend, ring_message(comm.rank(), 0, count));
  auto out2 = make(backend, ring_message(comm.rank(), 1, count));
  auto in1 = filled(backend, count, -1.0f), in2 = filled(backend, count, -1.0f);
  if (backend.p2p_matches_tags) {
    // Received in the opposite order to the sends: tags match.
    auto s1 = comm.send_async(out1->span(), next, 1);
    auto s2 = comm.send_async(out2->span(), next, 2);
    auto r2 = comm.recv_async(in2->span(), prev, 2);
    auto r1 = comm.recv_async(in1->span(), prev, 1);
    r2->wait();
    r1->wait();
    s1->wait();
    s2->wait();
  } else {
    std::vector<WorkHandle> work;
    auto receive = [&] {
      work.push_back(comm.recv_async(in1->span(), prev, 1));
      work.push_back(comm.recv_async(in2->span(), prev, 2));
    };
    if (comm.rank() == 0) receive();
    work.push_back(comm.send_async(out1->span(), next, 1));
    work.push_back(comm.send_async(out2->span(), next, 2));
    if (comm.rank() != 0) receive();
    for (auto& w : work) w->wait();
  }
  expect_equal(comm, "recv(tag 1)", count, in1->read(), ring_message(prev, 0, count));
  expect_equal(comm, "recv(tag 2)", count, in2->read(), ring_message(prev, 1, count));
}

void check_async_overlap(Communicator& comm, int64_t count, const Backend& backend) {
  constexpr int kInFlight = 3;
  std::vector<std::unique_ptr<Buffer>> bufs;
  std::vector<WorkHandle> work;
  for (int b = 0; b < kInFlight; ++b) {
    bufs.push_back(make(backend, contributions(comm.rank(), count, b)));
    work.push_back(comm.all_reduce_async(bufs.back()->span(), ReduceOp::Sum));
  }
  for (int b = kInFlight - 1; b >= 0; --b) work[b]->wait();
  for (int b = 0; b < kInFlight; ++b) {
    expect_equal(comm, fmt::format("async all_reduce #{}", b), count, bufs[b]->read(),
                 reductions(ReduceOp::Sum, comm.size(), count, b));
    if (!work[b]->done()) throw ConformanceFailure("done() is false after wait()");
  }
}

void check_barrier(Communicator& comm) {
  for (int i = 0; i < 3; ++i) comm.barrier();
}

void check_p2p_not_ordered_with_collectives(Communicator& comm) {
  constexpr int64_t kCount = 1000, kMsg = 64;
  constexpr int kTag = 11;
  std::vector<float> x(kCount), want(kCount), y(kMsg, -1.0f), want_y(kMsg);
  for (int64_t i = 0; i < kCount; ++i) {
    x[static_cast<size_t>(i)] = contribution(comm.rank(), i);
    want[static_cast<size_t>(i)] = reduced(ReduceOp::Sum, comm.size(), i);
  }
  for (int64_t i = 0; i < kMsg; ++i) want_y[static_cast<size_t>(i)] = static_cast<float>(i * 3 + 1);
  if (comm.size() >= 2 && comm.rank() == 0) {
    WorkHandle h = comm.all_reduce_async(x, ReduceOp::Sum);
    comm.send(want_y, 1, kTag);
    h->wait();
  } else if (comm.size() >= 2 && comm.rank() == 1) {
    comm.recv(y, 0, kTag);
    expect_equal(comm, "recv before the peer's pending all_reduce", kMsg, y, want_y);
    comm.all_reduce(x, ReduceOp::Sum);
  } else {
    comm.all_reduce(x, ReduceOp::Sum);
  }
  expect_equal(comm, "all_reduce around point to point", kCount, x, want);
}

void check_split(Communicator& comm, const Backend& backend) {
  const int n = comm.size(), r = comm.rank();
  // 1. Even and odd ranks, each ordered by descending old rank.
  {
    auto sub = comm.split(r % 2, -r, fmt::format("parity[{}]", r % 2));
    if (!sub) throw ConformanceFailure("split returned null for a non-negative color");
    std::vector<int> members;
    for (int q = n - 1; q >= 0; --q)
      if (q % 2 == r % 2) members.push_back(q);
    const auto pos = std::find(members.begin(), members.end(), r) - members.begin();
    if (sub->size() != static_cast<int>(members.size()) || sub->rank() != pos)
      throw ConformanceFailure(
          fmt::format("parity split: rank {} got rank {} of {}, expected {} of {}", r, sub->rank(),
                      sub->size(), pos, members.size()));
    if (sub->name() != fmt::format("parity[{}]", r % 2))
      throw ConformanceFailure("split name lost");
    // The sum of old ranks + 1 over the members proves the group holds exactly them.
    auto v = filled(backend, 5, static_cast<float>(r + 1));
    sub->all_reduce(v->span(), ReduceOp::Sum);
    float want = 0;
    for (int q : members) want += static_cast<float>(q + 1);
    expect_equal(*sub, "parity all_reduce", 5, v->read(), std::vector<float>(5, want));
    check_all_gather(*sub, 13, backend);
    check_broadcast(*sub, 9, sub->size() - 1, backend);
  }
  // 2. Rank 0 stays out (color -1); everyone else forms one group.
  {
    auto sub = comm.split(r == 0 ? -1 : 7, r, "rest");
    if (r == 0) {
      if (sub) throw ConformanceFailure("a negative color must give no group");
    } else {
      if (!sub || sub->size() != n - 1 || sub->rank() != r - 1)
        throw ConformanceFailure(fmt::format("split without rank 0: rank {} got a wrong group", r));
      check_all_reduce(*sub, 31, ReduceOp::Max, backend);
    }
  }
  // 3. Singleton groups work and need no peer.
  {
    auto sub = comm.split(r, 0, fmt::format("self[{}]", r));
    if (!sub || sub->size() != 1 || sub->rank() != 0) throw ConformanceFailure("singleton split");
    check_all_reduce(*sub, 10, ReduceOp::Sum, backend);
    check_reduce_scatter(*sub, 10, ReduceOp::Avg, backend);
    check_all_gather(*sub, 10, backend);
  }
}

void check_everything(Communicator& comm, const Backend& backend) {
  for (int64_t count : sweep_counts()) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
      check_all_reduce(comm, count, op, backend);
      check_reduce_scatter(comm, count, op, backend);
    }
    check_all_gather(comm, count, backend);
    if (count <= 97) {
      for (int root = 0; root < comm.size(); ++root) check_broadcast(comm, count, root, backend);
    } else {
      check_broadcast(comm, count, comm.size() - 1, backend);
    }
    check_send_recv_ring(comm, count, backend);
    check_async_overlap(comm, count, backend);
  }
  check_barrier(comm);
  if (backend.p2p_overtakes_collectives) check_p2p_not_ordered_with_collectives(comm);
  check_split(comm, backend);
}

}  // namespace shardlab::conformance
