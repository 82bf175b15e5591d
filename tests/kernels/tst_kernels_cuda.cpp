// Every CUDA kernel against its CPU reference on random data of several sizes, several steps,
// fp32 and with the bf16 copy; the maximum relative error per op is printed with qInfo. Without a
// usable GPU the whole suite is skipped with the reason (ctest reports it as skipped).
//
// The update kernels are built to round exactly as the CPU ones (same order of operations, no
// FMA, IEEE sqrt and division), so the expected error is 0; the tolerance (1e-6) leaves room for a
// CPU build that contracts to FMA (-march=native) without hiding a wrong formula.
#include <QtTest>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/scale_cast.h"
#include "kernels/cpu/sq_norm.h"
#include "kernels/cuda/adagrad_update.h"
#include "kernels/cuda/adam_update.h"
#include "kernels/cuda/rmsprop_update.h"
#include "kernels/cuda/scale_cast.h"
#include "kernels/cuda/sgd_update.h"
#include "kernels/cuda/sq_norm.h"
#include "update_cases.h"

using namespace shardlab::kernels;

namespace {

#define CUDA_OK(expr)                                                                 \
  do {                                                                                \
    const cudaError_t e_ = (expr);                                                    \
    if (e_ != cudaSuccess)                                                            \
      QFAIL(qPrintable(QStringLiteral("%1: %2").arg(#expr, cudaGetErrorString(e_)))); \
  } while (0)

// A device buffer; the test's only allocation path.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    if (n_ > 0 && cudaMalloc(&p_, n_ * sizeof(T)) != cudaSuccess)
      throw std::runtime_error("cudaMalloc failed");
  }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return static_cast<T*>(p_); }
  void upload(const std::vector<T>& v, cudaStream_t s) const {
    if (n_ > 0) cudaMemcpyAsync(p_, v.data(), n_ * sizeof(T), cudaMemcpyHostToDevice, s);
  }
  void download(std::vector<T>& v, cudaStream_t s) const {
    v.resize(n_);
    if (n_ > 0) cudaMemcpyAsync(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost, s);
  }

 private:
  void* p_ = nullptr;
  std::size_t n_;
};

// max_i |got - want| / max(|want_i|, 1e-3 * max_j |want_j|): relative where values are of the
// array's scale, absolute-at-that-scale for the few elements near zero (where one ulp of an
// intermediate would otherwise read as a large relative error).
double max_rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double scale = 0;
  for (const float w : want) scale = std::max(scale, std::fabs(static_cast<double>(w)));
  const double floor = std::max(1e-3 * scale, std::numeric_limits<double>::min());
  double err = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    err = std::max(err, d / std::max(std::fabs(static_cast<double>(want[i])), floor));
  }
  return err;
}

bool same_bf16(uint16_t a, uint16_t b) {
  const bool nan_a = std::isnan(bf16_to_float(a)), nan_b = std::isnan(bf16_to_float(b));
  return nan_a || nan_b ? nan_a && nan_b : a == b;
}

struct CudaRun {
  cudaStream_t stream;
  void operator()(const SgdArgs& a) const { sgd_update_cuda(a, stream); }
  void operator()(const AdamArgs& a) const { adam_update_cuda(a, stream); }
  void operator()(const RmspropArgs& a) const { rmsprop_update_cuda(a, stream); }
  void operator()(const AdagradArgs& a) const { adagrad_update_cuda(a, stream); }
};

constexpr double kTolerance = 1e-6;
constexpr int64_t kSteps = 3;
const std::vector<qint64> kSizes{1, 1000, (1 << 20) + 3};

}  // namespace

class tst_KernelsCuda : public QObject {
  Q_OBJECT

  cudaStream_t stream_ = nullptr;
  std::map<std::string, double> worst_;  // op -> max relative error over its rows

  void note(const std::string& op, double err) { worst_[op] = std::max(worst_[op], err); }

 private slots:
  void initTestCase() {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
      QSKIP(qPrintable(QStringLiteral("no usable GPU: cudaGetDeviceCount failed: %1 (%2)")
                           .arg(cudaGetErrorName(e), cudaGetErrorString(e))));
    if (count == 0) QSKIP("no usable GPU: cudaGetDeviceCount returned 0 devices");
    cudaDeviceProp prop{};
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    qInfo("device 0: %s, sm_%d%d", prop.name, prop.major, prop.minor);
    CUDA_OK(cudaStreamCreate(&stream_));
  }

  void cleanupTestCase() {
    for (const auto& [op, err] : worst_) qInfo("max relative error %-22s %.3g", op.c_str(), err);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  void updates_data() {
    QTest::addColumn<int>("op");
    QTest::addColumn<qint64>("n");
    QTest::addColumn<bool>("bf16");
    for (const auto op : test::all_ops())
      for (const qint64 n : kSizes)
        for (const bool bf16 : {false, true})
          QTest::addRow("%s n=%lld %s", test::op_name(op).c_str(), static_cast<long long>(n),
                        bf16 ? "bf16" : "fp32")
              << static_cast<int>(op) << n << bf16;
  }

  void updates() {
    QFETCH(int, op);
    QFETCH(qint64, n);
    QFETCH(bool, bf16);
    const auto o = static_cast<test::Op>(op);
    const auto seed = static_cast<uint32_t>(1000 + op * 10 + (n % 7));

    auto cpu = test::make_state(o, n, seed);
    auto gpu = test::make_state(o, n, seed);
    test::cpu_steps(o, cpu, seed, kSteps, bf16);

    const auto size = static_cast<std::size_t>(n);
    DeviceBuffer<float> p(size), g(size), s1(size), s2(size);
    DeviceBuffer<uint16_t> pb(size);
    p.upload(gpu.param, stream_);
    s1.upload(gpu.s1, stream_);
    s2.upload(gpu.s2, stream_);
    for (int64_t t = 1; t <= kSteps; ++t) {
      test::fill_grad(gpu.grad, seed, t);
      g.upload(gpu.grad, stream_);
      test::dispatch(
          o, test::Buffers{p.get(), g.get(), s1.get(), s2.get(), bf16 ? pb.get() : nullptr, n}, t,
          CudaRun{stream_});
      // The grad upload reads host memory that the next fill_grad overwrites: wait for it.
      CUDA_OK(cudaStreamSynchronize(stream_));
    }
    p.download(gpu.param, stream_);
    s1.download(gpu.s1, stream_);
    s2.download(gpu.s2, stream_);
    pb.download(gpu.bf16, stream_);
    CUDA_OK(cudaStreamSynchronize(stream_));

    const double err = std::max({max_rel_err(gpu.param, cpu.param), max_rel_err(gpu.s1, cpu.s1),
                                 max_rel_err(gpu.s2, cpu.s2)});
    const bool identical = gpu.param == cpu.param && gpu.s1 == cpu.s1 && gpu.s2 == cpu.s2;
    note(test::op_name(o) + (bf16 ? " (bf16)" : ""), err);
    qInfo("%s n=%lld %s: max rel err %.3g, %s", test::op_name(o).c_str(), static_cast<long long>(n),
          bf16 ? "bf16" : "fp32", err, identical ? "bit-identical" : "not bit-identical");
    QVERIFY2(err <= kTolerance, qPrintable(QStringLiteral("max rel err %1").arg(err)));
    if (bf16) {
      // The device copy is the device master rounded to nearest even, bit for bit; where the
      // masters agree bit for bit, so do the copies.
      for (std::size_t i = 0; i < size; ++i) {
        QVERIFY(same_bf16(gpu.bf16[i], float_to_bf16(gpu.param[i])));
        if (gpu.param[i] == cpu.param[i]) QVERIFY(same_bf16(gpu.bf16[i], cpu.bf16[i]));
      }
    }
  }

  void scale_cast_data() {
    QTest::addColumn<qint64>("n");
    for (const qint64 n : kSizes) QTest::addRow("n=%lld", static_cast<long long>(n)) << n;
  }

  void scale_cast() {
    QFETCH(qint64, n);
    const auto size = static_cast<std::size_t>(n);
    std::mt19937 rng(static_cast<uint32_t>(n));
    std::vector<float> in(size);
    for (auto& v : in) v = std::bit_cast<float>(static_cast<uint32_t>(rng()));  // all exponents
    // Special values first: ties, infinities, NaN, subnormals, overflow.
    const uint32_t specials[] = {0x3f808000u, 0x3f818000u, 0x7f800000u, 0xff800000u,
                                 0x7fc00000u, 0x00018000u, 0x007fffffu, 0x7f7fffffu};
    for (std::size_t i = 0; i < std::min(size, std::size(specials)); ++i)
      in[i] = std::bit_cast<float>(specials[i]);
    const float scale = 0.75f;

    std::vector<uint16_t> want_bf(size), got_bf;
    std::vector<float> want_back(size), got_back;
    scale_cast_to_bf16(in.data(), want_bf.data(), n, scale);
    scale_cast_from_bf16(want_bf.data(), want_back.data(), n, 1.0f / 1024);

    DeviceBuffer<float> d_in(size), d_back(size);
    DeviceBuffer<uint16_t> d_bf(size);
    d_in.upload(in, stream_);
    scale_cast_to_bf16_cuda(d_in.get(), d_bf.get(), n, scale, stream_);
    scale_cast_from_bf16_cuda(d_bf.get(), d_back.get(), n, 1.0f / 1024, stream_);
    d_bf.download(got_bf, stream_);
    d_back.download(got_back, stream_);
    CUDA_OK(cudaStreamSynchronize(stream_));

    std::size_t bad = 0;
    for (std::size_t i = 0; i < size; ++i) {
      if (!same_bf16(got_bf[i], want_bf[i])) ++bad;
      const bool nan_g = std::isnan(got_back[i]), nan_w = std::isnan(want_back[i]);
      if (nan_g != nan_w || (!nan_w && got_back[i] != want_back[i])) ++bad;
    }
    note("scale_cast", bad == 0 ? 0.0 : std::numeric_limits<double>::infinity());
    qInfo("scale_cast n=%lld: %zu of %zu elements differ from the CPU (bitwise, NaN == NaN)",
          static_cast<long long>(n), bad, 2 * size);
    QCOMPARE(bad, std::size_t{0});
  }

  void sq_norm_data() {
    QTest::addColumn<qint64>("n");
    for (const qint64 n :
         {qint64{0}, qint64{1}, qint64{1000}, qint64{(1 << 20) + 3}, qint64{(1 << 24) + 1}})
      QTest::addRow("n=%lld", static_cast<long long>(n)) << n;
  }

  void sq_norm() {
    QFETCH(qint64, n);
    const auto size = static_cast<std::size_t>(n);
    std::mt19937 rng(static_cast<uint32_t>(n) + 5);
    std::normal_distribution<float> d(0.0f, 3.0f);
    std::vector<float> x(size);
    for (auto& v : x) v = d(rng);
    const double want = shardlab::kernels::sq_norm(x.data(), n);

    DeviceBuffer<float> d_x(size);
    DeviceBuffer<double> d_out(2);
    d_x.upload(x, stream_);
    sq_norm_cuda(d_x.get(), n, d_out.get(), stream_);
    sq_norm_cuda(d_x.get(), n, d_out.get() + 1, stream_);
    std::vector<double> got;
    d_out.download(got, stream_);
    CUDA_OK(cudaStreamSynchronize(stream_));

    const double err = want == 0 ? std::fabs(got[0]) : std::fabs(got[0] - want) / want;
    note("sq_norm", err);
    qInfo("sq_norm n=%lld: %.17g vs CPU %.17g, rel err %.3g", static_cast<long long>(n), got[0],
          want, err);
    QVERIFY2(err <= 1e-12, qPrintable(QStringLiteral("rel err %1").arg(err)));
    QCOMPARE(std::bit_cast<uint64_t>(got[1]), std::bit_cast<uint64_t>(got[0]));  // deterministic
  }

  void bad_arguments_name_the_kernel() {
    SgdArgs a;
    a.n = -1;
    try {
      sgd_update_cuda(a, stream_);
      QFAIL("no exception");
    } catch (const std::runtime_error& e) {
      QVERIFY2(std::string(e.what()).find("sgd_update_cuda") != std::string::npos, e.what());
    }
    try {
      sq_norm_cuda(nullptr, -5, nullptr, stream_);
      QFAIL("no exception");
    } catch (const std::runtime_error& e) {
      QVERIFY2(std::string(e.what()).find("sq_norm_cuda") != std::string::npos, e.what());
    }
  }
};

QTEST_APPLESS_MAIN(tst_KernelsCuda)
#include "tst_kernels_cuda.moc"
