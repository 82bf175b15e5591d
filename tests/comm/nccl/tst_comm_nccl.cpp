// The NCCL backend against exact expected values, on real GPUs. Skipped as a whole (with the
// reason) where no usable GPU exists. World size 1 runs on any GPU; the sweep over every GPU of
// the machine (one rank per GPU, ranks as threads bootstrapped by the threads backend), uneven
// chunks, point to point and the timeout path need at least two.
//
// The shared conformance checks (tests/comm/conformance.h) run here on device buffers: this file
// plugs a factory of GPU arrays into them (data is made on the host, copied to the GPU, run through
// the operation and copied back) and states what NCCL does not promise (tag matching, point to
// point overtaking a collective).
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
#include "engine/doctor/nccl_checks.h"
#include "tests/comm/conformance.h"
#include "tests/common/doctor_rows.h"

using namespace shardlab;
using conformance::ConformanceFailure;

namespace {

void cuda_ok(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw ConformanceFailure(fmt::format("{} failed: {}", what, cudaGetErrorString(err)));
}

// One rank's array on its GPU (the thread's current device).
class DeviceArray final : public conformance::Buffer {
 public:
  explicit DeviceArray(const std::vector<float>& host) : count_(host.size()) {
    if (count_ == 0) return;
    cuda_ok(cudaMalloc(reinterpret_cast<void**>(&data_), bytes()), "cudaMalloc");
    cuda_ok(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice), "upload");
  }
  DeviceArray(size_t count, float fill) : DeviceArray(std::vector<float>(count, fill)) {}
  ~DeviceArray() override {
    if (data_) (void)cudaFree(data_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  std::span<float> span() override { return {data_, count_}; }
  std::vector<float> read() const override {
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

class DeviceArrays final : public conformance::BufferFactory {
 public:
  std::unique_ptr<conformance::Buffer> make(const std::vector<float>& values) const override {
    return std::make_unique<DeviceArray>(values);
  }
};

// The conformance checks on device buffers, with NCCL's ordering: a pair's messages match in issue
// order (tags are recorded, not matched), and point to point queues behind a pending collective.
const conformance::Backend& nccl_backend() {
  static const DeviceArrays arrays;
  static const conformance::Backend backend{
      .buffers = &arrays, .p2p_matches_tags = false, .p2p_overtakes_collectives = false};
  return backend;
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

  // The checks `shardlab doctor` runs (engine/doctor/nccl_checks.h): every collective against
  // exact host values, on one GPU and on every GPU; a skip only for what needs two GPUs.
  void doctorChecks() {
    const doctor::CheckList checks = doctor::nccl_checks();
    QVERIFY(!checks.empty());
    if (test::whole_group_skipped(checks).contains("built without"))
      QSKIP(qPrintable(test::whole_group_skipped(checks)));
    int passed = 0;
    for (const doctor::CheckResult& c : checks) {
      qInfo("%s", qPrintable(test::describe_check(c)));
      if (c.status == doctor::CheckStatus::kSkip)
        QVERIFY2(gpus_ < 2 && c.detail.rfind("needs two GPUs", 0) == 0,
                 qPrintable(test::describe_check(c)));
      else
        QVERIFY2(c.status == doctor::CheckStatus::kPass, qPrintable(test::describe_check(c)));
      passed += c.status == doctor::CheckStatus::kPass ? 1 : 0;
    }
    // Five ops at three sizes on one GPU, and again on every GPU where there are two.
    QCOMPARE(passed, gpus_ >= 2 ? 30 : 15);
  }

  void oneGpuEverything() {
    const std::string error =
        on_gpus(1, with_timeout(std::chrono::seconds(60)), [](Communicator& world, Communicator&) {
          if (std::string(world.backend()) != "nccl")
            throw ConformanceFailure("not the nccl backend");
          conformance::check_everything(world, nccl_backend());
        });
    QVERIFY2(error.empty(), error.c_str());
  }

  void allGpusEverything() {
    if (gpus_ < 2) QSKIP("needs 2 GPUs: one rank per GPU");
    const std::string error = on_gpus(gpus_, with_timeout(std::chrono::seconds(60)),
                                      [](Communicator& world, Communicator&) {
                                        conformance::check_everything(world, nccl_backend());
                                      });
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
            conformance::check_reduce_scatter(world, total, ReduceOp::Sum, nccl_backend());
            conformance::check_all_gather(world, total, nccl_backend());
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
