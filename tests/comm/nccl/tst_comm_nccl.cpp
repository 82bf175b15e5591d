// The NCCL backend against exact expected values, on real GPUs. Skipped as a whole (with the
// reason) where no usable GPU exists. World size 1 runs on any GPU; the sweep over every GPU of
// the machine (one rank per GPU, ranks as threads bootstrapped by the threads backend), uneven
// chunks, point to point and the timeout path need at least two.
//
// The conformance checks in tests/comm/conformance.h use host buffers, so this file has
// device-aware versions of them with the same value conventions: small integers in float, so sums
// are exact. Data is made on the host, copied to the GPU, run through the operation and copied
// back.
#include <cuda_runtime_api.h>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "engine/comm/nccl/communicator.h"
#include "engine/comm/nccl/world.h"
#include "engine/comm/threads/world.h"
#include "tests/comm/conformance.h"

using namespace shardlab;
using conformance::ConformanceFailure;
using conformance::contribution;
using conformance::expect_equal;
using conformance::reduced;

namespace {

void cuda_ok(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw ConformanceFailure(fmt::format("{} failed: {}", what, cudaGetErrorString(err)));
}

// One rank's array on its GPU (the thread's current device).
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<float>& host) : count_(host.size()) {
    if (count_ == 0) return;
    cuda_ok(cudaMalloc(reinterpret_cast<void**>(&data_), bytes()), "cudaMalloc");
    cuda_ok(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice), "upload");
  }
  DeviceArray(size_t count, float fill) : DeviceArray(std::vector<float>(count, fill)) {}
  ~DeviceArray() {
    if (data_) (void)cudaFree(data_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  std::span<float> span() { return {data_, count_}; }
  std::vector<float> host() const {
    std::vector<float> out(count_);
    if (count_ > 0)
      cuda_ok(cudaMemcpy(out.data(), data_, bytes(), cudaMemcpyDeviceToHost), "download");
    return out;
  }

 private:
  size_t bytes() const { return count_ * sizeof(float); }
  float* data_ = nullptr;
  size_t count_ = 0;
};

std::vector<float> contributions(int rank, int64_t count, int64_t shift = 0) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = contribution(rank, i + shift);
  return v;
}

void check_all_reduce(Communicator& comm, int64_t count, ReduceOp op) {
  DeviceArray data(contributions(comm.rank(), count));
  std::vector<float> want(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) want[static_cast<size_t>(i)] = reduced(op, comm.size(), i);
  comm.all_reduce(data.span(), op);
  expect_equal(comm, fmt::format("all_reduce({})", to_string(op)), count, data.host(), want);
}

void check_reduce_scatter(Communicator& comm, int64_t count, ReduceOp op) {
  DeviceArray input(contributions(comm.rank(), count));
  const IndexRange mine = chunk_range(count, comm.size(), comm.rank());
  DeviceArray output(static_cast<size_t>(mine.size()), -99.0f);
  std::vector<float> want;
  for (int64_t i = mine.begin; i < mine.end; ++i) want.push_back(reduced(op, comm.size(), i));
  comm.reduce_scatter(input.span(), output.span(), op);
  expect_equal(comm, fmt::format("reduce_scatter({})", to_string(op)), count, output.host(), want);
}

void check_all_gather(Communicator& comm, int64_t count) {
  // Element i is owned by the rank whose chunk holds it: its value names index and owner.
  auto value = [](int64_t i, int owner) { return static_cast<float>((i % 4096) + 10000 * owner); };
  const IndexRange mine = chunk_range(count, comm.size(), comm.rank());
  std::vector<float> in, want;
  for (int64_t i = mine.begin; i < mine.end; ++i) in.push_back(value(i, comm.rank()));
  for (int r = 0; r < comm.size(); ++r) {
    const IndexRange c = chunk_range(count, comm.size(), r);
    for (int64_t i = c.begin; i < c.end; ++i) want.push_back(value(i, r));
  }
  DeviceArray input(in), output(static_cast<size_t>(count), -1.0f);
  comm.all_gather(input.span(), output.span());
  expect_equal(comm, "all_gather", count, output.host(), want);
}

void check_broadcast(Communicator& comm, int64_t count, int root) {
  std::vector<float> want(static_cast<size_t>(count)), mine(static_cast<size_t>(count), -7.0f);
  for (int64_t i = 0; i < count; ++i) want[static_cast<size_t>(i)] = float((i % 11) + 100 * root);
  DeviceArray data(comm.rank() == root ? want : mine);
  comm.broadcast(data.span(), root);
  expect_equal(comm, fmt::format("broadcast(root {})", root), count, data.host(), want);
}

// A ring: every rank sends two messages to rank+1 and receives two from rank-1. NCCL matches
// messages between a pair in issue order (tags are recorded, not matched), and a send holds the
// stream until its receive is posted, so rank 0 receives first; the others send first.
void check_send_recv_ring(Communicator& comm, int64_t count) {
  if (comm.size() < 2) return;
  const int next = (comm.rank() + 1) % comm.size();
  const int prev = (comm.rank() + comm.size() - 1) % comm.size();
  auto message = [count](int from, int which) {
    std::vector<float> v(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i)
      v[static_cast<size_t>(i)] = static_cast<float>(from * 1000 + which * 500 + (i % 397));
    return v;
  };
  DeviceArray out1(message(comm.rank(), 0)), out2(message(comm.rank(), 1));
  DeviceArray in1(static_cast<size_t>(count), -1.0f), in2(static_cast<size_t>(count), -1.0f);
  std::vector<WorkHandle> work;
  auto receive = [&] {
    work.push_back(comm.recv_async(in1.span(), prev, 1));
    work.push_back(comm.recv_async(in2.span(), prev, 2));
  };
  if (comm.rank() == 0) receive();
  work.push_back(comm.send_async(out1.span(), next, 1));
  work.push_back(comm.send_async(out2.span(), next, 2));
  if (comm.rank() != 0) receive();
  for (auto& w : work) w->wait();
  expect_equal(comm, "recv #1", count, in1.host(), message(prev, 0));
  expect_equal(comm, "recv #2", count, in2.host(), message(prev, 1));
}

// Several all-reduces in flight at once, waited for in reverse order.
void check_async_overlap(Communicator& comm, int64_t count) {
  constexpr int kInFlight = 3;
  std::vector<std::unique_ptr<DeviceArray>> bufs;
  std::vector<WorkHandle> work;
  for (int b = 0; b < kInFlight; ++b) {
    bufs.push_back(std::make_unique<DeviceArray>(contributions(comm.rank(), count, b)));
    work.push_back(comm.all_reduce_async(bufs.back()->span(), ReduceOp::Sum));
  }
  for (int b = kInFlight - 1; b >= 0; --b) work[b]->wait();
  for (int b = 0; b < kInFlight; ++b) {
    std::vector<float> want(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i)
      want[static_cast<size_t>(i)] = reduced(ReduceOp::Sum, comm.size(), i + b);
    expect_equal(comm, fmt::format("async all_reduce #{}", b), count, bufs[b]->host(), want);
    if (!work[b]->done()) throw ConformanceFailure("done() is false after wait()");
  }
}

// Splits three ways (parity groups ordered by descending old rank; everyone but rank 0; one group
// per rank) and runs collectives inside each sub-group.
void check_split(Communicator& comm) {
  const int n = comm.size(), r = comm.rank();
  {
    auto sub = comm.split(r % 2, -r, fmt::format("parity[{}]", r % 2));
    if (!sub) throw ConformanceFailure("split returned null for a non-negative color");
    std::vector<int> members;
    for (int q = n - 1; q >= 0; --q)
      if (q % 2 == r % 2) members.push_back(q);
    const auto pos = std::find(members.begin(), members.end(), r) - members.begin();
    if (sub->size() != static_cast<int>(members.size()) || sub->rank() != pos ||
        sub->name() != fmt::format("parity[{}]", r % 2))
      throw ConformanceFailure(fmt::format("parity split: rank {} got rank {} of {} named {}", r,
                                           sub->rank(), sub->size(), sub->name()));
    DeviceArray v(5, static_cast<float>(r + 1));
    sub->all_reduce(v.span(), ReduceOp::Sum);
    float want = 0;
    for (int q : members) want += static_cast<float>(q + 1);
    expect_equal(*sub, "parity all_reduce", 5, v.host(), std::vector<float>(5, want));
    check_all_gather(*sub, 13);
    check_broadcast(*sub, 9, sub->size() - 1);
  }
  {
    auto sub = comm.split(r == 0 ? -1 : 7, r, "rest");
    if (r == 0) {
      if (sub) throw ConformanceFailure("a negative color must give no group");
    } else {
      if (!sub || sub->size() != n - 1 || sub->rank() != r - 1)
        throw ConformanceFailure(fmt::format("split without rank 0: rank {} got a wrong group", r));
      check_all_reduce(*sub, 31, ReduceOp::Max);
    }
  }
  {
    auto sub = comm.split(r, 0, fmt::format("self[{}]", r));
    if (!sub || sub->size() != 1 || sub->rank() != 0) throw ConformanceFailure("singleton split");
    check_all_reduce(*sub, 10, ReduceOp::Sum);
    check_reduce_scatter(*sub, 10, ReduceOp::Avg);
    check_all_gather(*sub, 10);
  }
}

void check_everything(Communicator& comm) {
  for (int64_t count : conformance::sweep_counts()) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
      check_all_reduce(comm, count, op);
      check_reduce_scatter(comm, count, op);
    }
    check_all_gather(comm, count);
    if (count <= 97) {
      for (int root = 0; root < comm.size(); ++root) check_broadcast(comm, count, root);
    } else {
      check_broadcast(comm, count, comm.size() - 1);
    }
    check_send_recv_ring(comm, count);
    check_async_overlap(comm, count);
  }
  for (int i = 0; i < 3; ++i) comm.barrier();
  check_split(comm);
}

CommOptions with_timeout(std::chrono::milliseconds timeout,
                         std::shared_ptr<CommSink> sink = nullptr) {
  CommOptions options;
  options.timeout = timeout;
  options.sink = std::move(sink);
  return options;
}

// Runs `body` on `n` ranks, rank r on GPU r, as threads bootstrapped by the threads backend.
// Returns the first failure's message, or "".
std::string on_gpus(int n, const CommOptions& nccl_options,
                    const std::function<void(Communicator& world, Communicator& boot)>& body) {
  try {
    run_threads(n, with_timeout(std::chrono::seconds(120)), [&](Communicator& boot) {
      cuda_ok(cudaSetDevice(boot.rank()), "cudaSetDevice");  // for the test's own buffers
      auto world = make_nccl_world(boot, boot.rank(), nccl_options);
      body(*world, boot);
    });
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

}  // namespace

class TestCommNccl : public QObject {
  Q_OBJECT

 private:
  int gpus_ = 0;

 private slots:
  void initTestCase() {
    std::string why;
    gpus_ = usable_cuda_devices(&why);
    if (gpus_ == 0) QSKIP(qPrintable(QString::fromStdString("no usable GPU: " + why)));
    int version = 0;
    (void)ncclGetVersion(&version);
    qInfo("%d GPU(s); NCCL headers %d.%d.%d, library version code %d", gpus_, NCCL_MAJOR,
          NCCL_MINOR, NCCL_PATCH, version);
  }

  // The id's bytes survive the float broadcast, including patterns that read as NaNs.
  void idBytesSurviveFloatBroadcast() {
    std::vector<unsigned char> bytes(128);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(0xff - i);
    bytes[0] = bytes[1] = 0xff;  // a NaN pattern in the first float (little-endian)
    bytes[3] = 0x7f;
    bytes[2] = 0xa0;  // signalling NaN: quiet bit clear
    std::string error;
    try {
      run_threads(3, with_timeout(std::chrono::seconds(30)), [&](Communicator& boot) {
        std::vector<float> words(32, 0.0f);
        if (boot.rank() == 0) std::memcpy(words.data(), bytes.data(), bytes.size());
        boot.broadcast(words, 0);
        if (std::memcmp(words.data(), bytes.data(), bytes.size()) != 0)
          throw ConformanceFailure(fmt::format("rank {} received different bytes", boot.rank()));
      });
    } catch (const std::exception& e) {
      error = e.what();
    }
    QVERIFY2(error.empty(), error.c_str());
  }

  void oneGpuEverything() {
    const std::string error =
        on_gpus(1, with_timeout(std::chrono::seconds(60)), [](Communicator& world, Communicator&) {
          if (std::string(world.backend()) != "nccl")
            throw ConformanceFailure("not the nccl backend");
          check_everything(world);
        });
    QVERIFY2(error.empty(), error.c_str());
  }

  void allGpusEverything() {
    if (gpus_ < 2) QSKIP("needs 2 GPUs: one rank per GPU");
    const std::string error =
        on_gpus(gpus_, with_timeout(std::chrono::seconds(60)),
                [](Communicator& world, Communicator&) { check_everything(world); });
    QVERIFY2(error.empty(), error.c_str());
  }

  // Totals that divide by no group size go through the padded scratch path (and again through
  // the even path once they do): explicit cases beside the sweep.
  void allGpusUnevenChunks() {
    if (gpus_ < 2) QSKIP("needs 2 GPUs: world size 1 never pads");
    const std::string error = on_gpus(
        gpus_, with_timeout(std::chrono::seconds(60)), [&](Communicator& world, Communicator&) {
          const int n = world.size();
          for (int64_t total : {int64_t{1}, int64_t{n - 1}, int64_t{n + 1}, int64_t{2 * n + 1},
                                int64_t{10}, int64_t{1 << 20} + 1, int64_t{5}, int64_t{3}}) {
            check_reduce_scatter(world, total, ReduceOp::Sum);
            check_all_gather(world, total);
          }
        });
    QVERIFY2(error.empty(), error.c_str());
  }

  void hostMemoryIsRejected() {
    const std::string error =
        on_gpus(1, with_timeout(std::chrono::seconds(60)), [](Communicator& world, Communicator&) {
          std::vector<float> host(8, 1.0f);
          try {
            world.all_reduce(host, ReduceOp::Sum);
          } catch (const InvalidArgument& e) {
            if (std::string(e.what()).find("device memory") == std::string::npos)
              throw ConformanceFailure(std::string("unclear message: ") + e.what());
            DeviceArray ok(8, 1.0f);  // nothing was sent: the communicator still works
            world.all_reduce(ok.span(), ReduceOp::Sum);
            return;
          }
          throw ConformanceFailure("a host buffer was accepted");
        });
    QVERIFY2(error.empty(), error.c_str());
  }

  // Every operation yields one record, emitted when its completion is observed; a handle dropped
  // without a wait is observed by the next operation.
  void recordsAreEmitted() {
    auto sink = std::make_shared<MemorySink>();
    const std::string error = on_gpus(
        1, with_timeout(std::chrono::seconds(60), sink), [&](Communicator& world, Communicator&) {
          DeviceArray a(100, 1.0f), out(100, 0.0f);
          world.all_reduce(a.span(), ReduceOp::Sum);
          world.all_gather(a.span(), out.span());
          world.broadcast(a.span(), 0);
          world.barrier();
          (void)world.all_reduce_async(a.span(), ReduceOp::Max);  // dropped unwaited
          world.all_reduce(a.span(), ReduceOp::Sum);
        });
    QVERIFY2(error.empty(), error.c_str());
    const auto records = sink->records();
    QCOMPARE(records.size(), size_t{6});
    const CommOp ops[] = {CommOp::AllReduce, CommOp::AllGather, CommOp::Broadcast,
                          CommOp::Barrier,   CommOp::AllReduce, CommOp::AllReduce};
    for (size_t i = 0; i < records.size(); ++i) {
      QVERIFY(records[i].op == ops[i]);
      QCOMPARE(records[i].seq, uint64_t{i});
      QCOMPARE(records[i].group, std::string("world"));
      QVERIFY(records[i].ok);
      QVERIFY(records[i].end >= records[i].start);
    }
    QCOMPARE(records[0].bytes, int64_t{400});
  }

  // Rank 0 waits for an all-reduce rank 1 never joins: TimeoutError naming the operation, the
  // communicator aborted, a failed record. Then rank 1, whose peer is gone, cannot complete
  // either.
  void timeoutAbortsTheCommunicator() {
    if (gpus_ < 2) QSKIP("needs 2 GPUs: a timeout needs a peer that does not arrive");
    auto sink = std::make_shared<MemorySink>();
    const auto timeout = std::chrono::milliseconds(3000);
    const std::string error =
        on_gpus(2, with_timeout(timeout, sink), [&](Communicator& world, Communicator& boot) {
          auto& nccl = dynamic_cast<NcclCommunicator&>(world);
          DeviceArray warm(4, 1.0f);
          world.all_reduce(warm.span(), ReduceOp::Sum);  // connect first: the hang is in wait()
          DeviceArray data(16, 1.0f);
          if (world.rank() == 0) {
            const auto start = Clock::now();
            auto work = world.all_reduce_async(data.span(), ReduceOp::Sum);
            try {
              work->wait();
              throw ConformanceFailure("the all_reduce completed without its peer");
            } catch (const TimeoutError& e) {
              const std::string what = e.what();
              for (const char* part : {"all_reduce on group world (seq 1)", "rank 0 of 2",
                                       "NCCL cannot tell which ranks are missing", "aborted"})
                if (what.find(part) == std::string::npos)
                  throw ConformanceFailure(fmt::format("message lacks \"{}\": {}", part, what));
            }
            if (Clock::now() - start < timeout) throw ConformanceFailure("timed out too early");
            if (!nccl.aborted()) throw ConformanceFailure("not aborted after the timeout");
            try {
              work->wait();  // rethrows the same error
              throw ConformanceFailure("a second wait() succeeded");
            } catch (const TimeoutError&) {
            }
            try {
              world.barrier();
              throw ConformanceFailure("an aborted communicator accepted an operation");
            } catch (const CommError&) {
            }
          }
          boot.barrier();  // rank 1 starts only after rank 0 has given up
          if (world.rank() == 1) {
            try {
              world.all_reduce(data.span(), ReduceOp::Sum);
              throw ConformanceFailure("completed although rank 0 aborted");
            } catch (const TimeoutError&) {
            } catch (const CommError&) {  // should NCCL notice the peer is gone
            }
            if (!nccl.aborted()) throw ConformanceFailure("rank 1 not aborted");
          }
        });
    QVERIFY2(error.empty(), error.c_str());
    bool failed_record = false;
    for (const auto& r : sink->records())
      if (r.rank == 0 && r.seq == 1 && r.op == CommOp::AllReduce) failed_record = !r.ok;
    QVERIFY(failed_record);
  }
};

QTEST_APPLESS_MAIN(TestCommNccl)
#include "tst_comm_nccl.moc"
