// Every CUDA kernel against its CPU reference on random data of several sizes, several steps,
// fp32 and with the bf16 copy; the maximum relative error per op is printed with qInfo. Without a
// usable GPU the whole suite is skipped with the reason (ctest reports it as skipped).
//
// The update kernels are built to round exactly as the CPU ones (same order of operations, no
// FMA, IEEE sqrt and division), so the expected error is 0; the tolerance (1e-6) leaves room for a
// CPU build that contracts to FMA (-march=native) without hiding a wrong formula.
//
// The layer kernels (element-wise, activations, layer norm, softmax cross-entropy, embedding,
// GEMM, attention) are checked on random data at several shapes, odd ones included. Tolerances:
//  - 1e-5 element-wise relative (max_rel_err) for the element-wise ops, ReLU, layer norm and
//    softmax cross-entropy, which keep the CPU's order of operations (expected error: 0, or the
//    last bit of the device's exp/log in the softmax);
//  - 1e-5 normwise (max_norm_err: max |diff| / max |want|) where the device's tanhf or expf, or a
//    GEMM's different summation order, feeds a cancellation (GELU, attention probabilities):
//    one ulp of an intermediate is then large relative to a result near zero, but not to the
//    array's scale;
//  - 1e-4 normwise for the GEMM-based outputs (gemm, batched gemm, attention out and dqkv);
//  - bit-identical where the order of the additions is the CPU's by construction: bias_grad,
//    the embedding forward and backward, layer norm's dweight/dbias given the CPU's xhat.
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

#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/scale_cast.h"
#include "kernels/cpu/softmax_xent.h"
#include "kernels/cpu/sq_norm.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/adagrad_update.h"
#include "kernels/cuda/adam_update.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/layer_norm.h"
#include "kernels/cuda/rmsprop_update.h"
#include "kernels/cuda/scale_cast.h"
#include "kernels/cuda/sgd_update.h"
#include "kernels/cuda/softmax_xent.h"
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

// The same for doubles (row losses).
double max_rel_err(const std::vector<double>& got, const std::vector<double>& want) {
  double scale = 0;
  for (const double w : want) scale = std::max(scale, std::fabs(w));
  const double floor = std::max(1e-3 * scale, std::numeric_limits<double>::min());
  double err = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    err = std::max(err, std::fabs(got[i] - want[i]) / std::max(std::fabs(want[i]), floor));
  return err;
}

// max_i |got - want| / max_j |want_j| (0 when both are all zeros): the error at the array's
// scale, for results that cancel (GEMMs, GELU's 1 + t near t = -1).
double max_norm_err(const std::vector<float>& got, const std::vector<float>& want) {
  double scale = 0, diff = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
    diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  return diff == 0 ? 0.0 : diff / std::max(scale, std::numeric_limits<double>::min());
}

// Bitwise equality (no NaN in these tests).
bool identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
           return std::bit_cast<uint32_t>(x) == std::bit_cast<uint32_t>(y);
         });
}

std::vector<float> randn(std::size_t n, uint32_t seed, float mean = 0.0f, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(mean, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// A device copy of a host vector.
template <class T>
struct DeviceCopy {
  DeviceCopy(const std::vector<T>& v, cudaStream_t s) : buf(v.size()) { buf.upload(v, s); }
  DeviceBuffer<T> buf;
  T* get() const { return buf.get(); }
};

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
  cublasHandle_t cublas_ = nullptr;
  std::map<std::string, double> worst_;  // op -> max relative error over its rows

  void note(const std::string& op, double err) { worst_[op] = std::max(worst_[op], err); }

  // Notes err for op, logs it and checks it against tol (false: the caller returns).
  bool check(const std::string& op, const QString& shape, double err, double tol) {
    note(op, err);
    qInfo("%s %s: max err %.3g (tolerance %.0e)", op.c_str(), qPrintable(shape), err, tol);
    if (err <= tol) return true;
    QTest::qFail(qPrintable(QStringLiteral("%1 %2: error %3 above %4")
                                .arg(QString::fromStdString(op), shape)
                                .arg(err)
                                .arg(tol)),
                 __FILE__, __LINE__);
    return false;
  }

  // Bit-identical results required.
  bool check_identical(const std::string& op, const QString& shape, const std::vector<float>& got,
                       const std::vector<float>& want) {
    const bool same = identical(got, want);
    note(op, same ? 0.0 : std::max(max_rel_err(got, want), 1e-300));
    qInfo("%s %s: %s", op.c_str(), qPrintable(shape), same ? "bit-identical" : "NOT bit-identical");
    if (same) return true;
    QTest::qFail(qPrintable(QStringLiteral("%1 %2: not bit-identical to the CPU (max rel err %3)")
                                .arg(QString::fromStdString(op), shape)
                                .arg(max_rel_err(got, want))),
                 __FILE__, __LINE__);
    return false;
  }

  void sync() {
    const cudaError_t e = cudaStreamSynchronize(stream_);
    if (e != cudaSuccess) throw std::runtime_error(cudaGetErrorString(e));
  }

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
    cublas_ = make_cublas_handle(stream_);
  }

  void cleanupTestCase() {
    for (const auto& [op, err] : worst_) qInfo("max relative error %-22s %.3g", op.c_str(), err);
    if (cublas_ != nullptr) cublasDestroy(cublas_);
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
    // The CPU adds left to right, whose rounding error grows up to ~n u (u = 2^-53) relative; the
    // GPU's tree is more accurate (measured on a CPU emulation of the kernel: 1.3e-12 from the CPU
    // at n = 2^24 + 1, and equal to a compensated sum). Allow the CPU's bound, 2 n u.
    const double tol = std::max(1e-15, 2.0 * static_cast<double>(n) * std::ldexp(1.0, -53));
    QVERIFY2(err <= tol, qPrintable(QStringLiteral("rel err %1 > %2").arg(err).arg(tol)));
    QCOMPARE(std::bit_cast<uint64_t>(got[1]), std::bit_cast<uint64_t>(got[0]));  // deterministic
  }

  // ---- the layer kernels ----

  void elementwise_vs_cpu_data() {
    QTest::addColumn<qint64>("rows");
    QTest::addColumn<qint64>("cols");
    for (const qint64 rows : {1, 7, 1000})
      for (const qint64 cols : {1, 33, 768})
        QTest::addRow("%lldx%lld", static_cast<long long>(rows), static_cast<long long>(cols))
            << rows << cols;
  }

  void elementwise_vs_cpu() {
    QFETCH(qint64, rows);
    QFETCH(qint64, cols);
    const QString shape = QStringLiteral("%1x%2").arg(rows).arg(cols);
    const auto n = static_cast<std::size_t>(rows * cols);
    const auto seed = static_cast<uint32_t>(rows * 131 + cols);
    const auto a = randn(n, seed), b = randn(n, seed + 1), bias = randn(cols, seed + 2),
               dbias0 = randn(cols, seed + 3);
    const float s = 0.37f;

    std::vector<float> sum(n), scaled = a, biased = a, dbias = dbias0;
    add(a.data(), b.data(), sum.data(), rows * cols);
    shardlab::kernels::scale(scaled.data(), rows * cols, s);
    bias_add(biased.data(), bias.data(), rows, cols);
    bias_grad(a.data(), dbias.data(), rows, cols);

    DeviceCopy<float> d_a(a, stream_), d_b(b, stream_), d_bias(bias, stream_),
        d_dbias(dbias0, stream_), d_scaled(a, stream_), d_biased(a, stream_);
    DeviceBuffer<float> d_sum(n);
    add_cuda(d_a.get(), d_b.get(), d_sum.get(), rows * cols, stream_);
    scale_cuda(d_scaled.get(), rows * cols, s, stream_);
    bias_add_cuda(d_biased.get(), d_bias.get(), rows, cols, stream_);
    bias_grad_cuda(d_a.get(), d_dbias.get(), rows, cols, stream_);
    std::vector<float> g_sum, g_scaled, g_biased, g_dbias;
    d_sum.download(g_sum, stream_);
    d_scaled.buf.download(g_scaled, stream_);
    d_biased.buf.download(g_biased, stream_);
    d_dbias.buf.download(g_dbias, stream_);
    sync();

    if (!check("add", shape, max_rel_err(g_sum, sum), 1e-5)) return;
    if (!check("scale", shape, max_rel_err(g_scaled, scaled), 1e-5)) return;
    if (!check("bias_add", shape, max_rel_err(g_biased, biased), 1e-5)) return;
    if (!check_identical("bias_grad", shape, g_dbias, dbias)) return;
  }

  void activations_vs_cpu_data() {
    QTest::addColumn<qint64>("n");
    for (const qint64 n : {qint64{1}, qint64{7}, qint64{1000}, qint64{(1 << 20) + 3}})
      QTest::addRow("n=%lld", static_cast<long long>(n)) << n;
  }

  void activations_vs_cpu() {
    QFETCH(qint64, n);
    const QString shape = QStringLiteral("n=%1").arg(n);
    const auto size = static_cast<std::size_t>(n);
    auto x = randn(size, static_cast<uint32_t>(n) + 11, 0.0f, 3.0f);
    if (size >= 3) {
      x[1] = 0.0f;
      x[2] = -0.0f;
    }
    const auto dy = randn(size, static_cast<uint32_t>(n) + 12);

    std::vector<float> relu_y(size), relu_dx(size), gelu_y(size), gelu_t(size), gelu_dx_t(size),
        gelu_dx(size);
    relu_forward(x.data(), relu_y.data(), n);
    relu_backward(relu_y.data(), dy.data(), relu_dx.data(), n);
    gelu_forward(x.data(), gelu_y.data(), gelu_t.data(), n);
    gelu_backward(x.data(), gelu_t.data(), dy.data(), gelu_dx_t.data(), n);
    gelu_backward(x.data(), nullptr, dy.data(), gelu_dx.data(), n);

    DeviceCopy<float> d_x(x, stream_), d_dy(dy, stream_), d_relu_y(relu_y, stream_),
        d_cpu_t(gelu_t, stream_);
    DeviceBuffer<float> d_ry(size), d_rdx(size), d_gy(size), d_gt(size), d_gdx_t(size), d_gdx(size);
    relu_forward_cuda(d_x.get(), d_ry.get(), n, stream_);
    relu_backward_cuda(d_relu_y.get(), d_dy.get(), d_rdx.get(), n, stream_);
    gelu_forward_cuda(d_x.get(), d_gy.get(), d_gt.get(), n, stream_);
    // With the CPU's t, the backward is the same float arithmetic: expected bit-identical.
    gelu_backward_cuda(d_x.get(), d_cpu_t.get(), d_dy.get(), d_gdx_t.get(), n, stream_);
    gelu_backward_cuda(d_x.get(), nullptr, d_dy.get(), d_gdx.get(), n, stream_);
    std::vector<float> g_ry, g_rdx, g_gy, g_gt, g_gdx_t, g_gdx;
    d_ry.download(g_ry, stream_);
    d_rdx.download(g_rdx, stream_);
    d_gy.download(g_gy, stream_);
    d_gt.download(g_gt, stream_);
    d_gdx_t.download(g_gdx_t, stream_);
    d_gdx.download(g_gdx, stream_);
    sync();

    if (!check_identical("relu_forward", shape, g_ry, relu_y)) return;
    if (!check_identical("relu_backward", shape, g_rdx, relu_dx)) return;
    // The device's tanhf is not glibc's: a few ulp on t, then cancellation in 1 + t.
    if (!check("gelu_forward tanh", shape, max_norm_err(g_gt, gelu_t), 1e-5)) return;
    if (!check("gelu_forward", shape, max_norm_err(g_gy, gelu_y), 1e-5)) return;
    if (!check("gelu_backward (t given)", shape, max_rel_err(g_gdx_t, gelu_dx_t), 1e-5)) return;
    if (!check("gelu_backward (t recomputed)", shape, max_norm_err(g_gdx, gelu_dx), 1e-5)) return;
  }

  void layer_norm_vs_cpu_data() { elementwise_vs_cpu_data(); }

  void layer_norm_vs_cpu() {
    QFETCH(qint64, rows);
    QFETCH(qint64, cols);
    const int64_t dim = cols;
    const QString shape = QStringLiteral("%1x%2").arg(rows).arg(dim);
    const auto n = static_cast<std::size_t>(rows * dim);
    const auto seed = static_cast<uint32_t>(rows * 7 + dim) + 100;
    // |mean| >> std in places, as the two-pass variance is there for.
    const auto x = randn(n, seed, 5.0f, 2.0f), w = randn(dim, seed + 1, 1.0f, 0.5f),
               b = randn(dim, seed + 2), dy = randn(n, seed + 3), dw0 = randn(dim, seed + 4),
               db0 = randn(dim, seed + 5);
    const float eps = 1e-5f;

    std::vector<float> y(n), xhat(n), rstd(rows), dx(n), dw = dw0, db = db0;
    layer_norm_forward(x.data(), w.data(), b.data(), y.data(), xhat.data(), rstd.data(), rows, dim,
                       eps);
    layer_norm_backward(dy.data(), xhat.data(), rstd.data(), w.data(), dx.data(), dw.data(),
                        db.data(), rows, dim);

    DeviceCopy<float> d_x(x, stream_), d_w(w, stream_), d_b(b, stream_), d_dy(dy, stream_),
        d_dw(dw0, stream_), d_db(db0, stream_), d_cpu_xhat(xhat, stream_),
        d_cpu_rstd(rstd, stream_);
    DeviceBuffer<float> d_y(n), d_xhat(n), d_rstd(rows), d_dx(n);
    layer_norm_forward_cuda(d_x.get(), d_w.get(), d_b.get(), d_y.get(), d_xhat.get(), d_rstd.get(),
                            rows, dim, eps, stream_);
    // The backward from the CPU's xhat and rstd: the same inputs, so the same sums.
    layer_norm_backward_cuda(d_dy.get(), d_cpu_xhat.get(), d_cpu_rstd.get(), d_w.get(), d_dx.get(),
                             d_dw.get(), d_db.get(), rows, dim, stream_);
    std::vector<float> g_y, g_xhat, g_rstd, g_dx, g_dw, g_db;
    d_y.download(g_y, stream_);
    d_xhat.download(g_xhat, stream_);
    d_rstd.download(g_rstd, stream_);
    d_dx.download(g_dx, stream_);
    d_dw.buf.download(g_dw, stream_);
    d_db.buf.download(g_db, stream_);
    sync();

    if (!check("layer_norm_forward y", shape, max_rel_err(g_y, y), 1e-5)) return;
    if (!check("layer_norm_forward xhat", shape, max_rel_err(g_xhat, xhat), 1e-5)) return;
    if (!check("layer_norm_forward rstd", shape, max_rel_err(g_rstd, rstd), 1e-5)) return;
    if (!check("layer_norm_backward dx", shape, max_rel_err(g_dx, dx), 1e-5)) return;
    if (!check_identical("layer_norm_backward dweight", shape, g_dw, dw)) return;
    if (!check_identical("layer_norm_backward dbias", shape, g_db, db)) return;
  }

  void softmax_xent_vs_cpu_data() {
    QTest::addColumn<qint64>("rows");
    QTest::addColumn<qint64>("classes");
    for (const qint64 rows : {1, 7, 1000})
      for (const qint64 classes : {1, 33, 768, 1000})
        QTest::addRow("%lldx%lld", static_cast<long long>(rows), static_cast<long long>(classes))
            << rows << classes;
  }

  void softmax_xent_vs_cpu() {
    QFETCH(qint64, rows);
    QFETCH(qint64, classes);
    const QString shape = QStringLiteral("%1x%2").arg(rows).arg(classes);
    const auto n = static_cast<std::size_t>(rows * classes);
    const auto seed = static_cast<uint32_t>(rows * 3 + classes) + 200;
    auto logits = randn(n, seed, 0.0f, 3.0f);
    std::vector<int32_t> targets(static_cast<std::size_t>(rows));
    std::mt19937 rng(seed + 1);
    for (auto& t : targets) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(classes));
    // Row 0: a tie for the maximum at columns 0 and 1 (the first one counts) and the target on
    // it, so row_correct sees a 1.
    if (classes >= 2) {
      logits[0] = logits[1] = 20.0f;
      targets[0] = 0;
    }

    std::vector<float> probs(n), dlogits(n);
    std::vector<double> loss(static_cast<std::size_t>(rows));
    std::vector<int32_t> correct(static_cast<std::size_t>(rows));
    const float scale = 1.0f / static_cast<float>(rows);
    softmax_xent_forward(logits.data(), targets.data(), probs.data(), loss.data(), correct.data(),
                         rows, classes);
    softmax_xent_backward(probs.data(), targets.data(), dlogits.data(), rows, classes, scale);

    DeviceCopy<float> d_logits(logits, stream_), d_cpu_probs(probs, stream_);
    DeviceCopy<int32_t> d_targets(targets, stream_);
    DeviceBuffer<float> d_probs(n), d_dlogits(n);
    DeviceBuffer<double> d_loss(static_cast<std::size_t>(rows));
    DeviceBuffer<int32_t> d_correct(static_cast<std::size_t>(rows));
    softmax_xent_forward_cuda(d_logits.get(), d_targets.get(), d_probs.get(), d_loss.get(),
                              d_correct.get(), rows, classes, stream_);
    softmax_xent_backward_cuda(d_cpu_probs.get(), d_targets.get(), d_dlogits.get(), rows, classes,
                               scale, stream_);
    std::vector<float> g_probs, g_dlogits;
    std::vector<double> g_loss;
    std::vector<int32_t> g_correct;
    d_probs.download(g_probs, stream_);
    d_dlogits.download(g_dlogits, stream_);
    d_loss.download(g_loss, stream_);
    d_correct.download(g_correct, stream_);
    sync();

    if (!check("softmax_xent_forward probs", shape, max_rel_err(g_probs, probs), 1e-5)) return;
    // Doubles: only the device's exp and log differ from glibc's (last bits).
    if (!check("softmax_xent_forward row_loss", shape, max_rel_err(g_loss, loss), 1e-12)) return;
    QCOMPARE(g_correct, correct);
    if (!check("softmax_xent_backward", shape, max_rel_err(g_dlogits, dlogits), 1e-5)) return;
  }

  void embedding_vs_cpu_data() {
    QTest::addColumn<qint64>("vocab");
    QTest::addColumn<qint64>("dim");
    for (const qint64 vocab : {1, 65, 1000})
      for (const qint64 dim : {1, 33, 768})
        QTest::addRow("vocab=%lld dim=%lld", static_cast<long long>(vocab),
                      static_cast<long long>(dim))
            << vocab << dim;
  }

  void embedding_vs_cpu() {
    QFETCH(qint64, vocab);
    QFETCH(qint64, dim);
    const int64_t batch = 3, steps = 17, n = batch * steps;
    const auto seed = static_cast<uint32_t>(vocab * 5 + dim) + 300;
    std::mt19937 rng(seed);
    std::vector<int32_t> ids(static_cast<std::size_t>(n));
    // Half the ids from a handful of values: repeated ids, several rows per segment.
    for (auto& id : ids)
      id = static_cast<int32_t>(rng() % 2
                                    ? rng() % static_cast<uint32_t>(vocab)
                                    : rng() % static_cast<uint32_t>(std::min<qint64>(vocab, 5)));
    const auto table = randn(static_cast<std::size_t>(vocab * dim), seed + 1),
               pos = randn(static_cast<std::size_t>(steps * dim), seed + 2),
               dy = randn(static_cast<std::size_t>(n * dim), seed + 3),
               dtable0 = randn(static_cast<std::size_t>(vocab * dim), seed + 4),
               dpos0 = randn(static_cast<std::size_t>(steps * dim), seed + 5);
    const EmbeddingGradIndex index = embedding_grad_index(ids.data(), n, vocab);

    for (const bool with_pos : {false, true}) {
      const QString shape = QStringLiteral("vocab=%1 dim=%2 n=%3 %4")
                                .arg(vocab)
                                .arg(dim)
                                .arg(n)
                                .arg(with_pos ? "with positions" : "no positions");
      std::vector<float> y(static_cast<std::size_t>(n * dim)), dtable = dtable0, dpos = dpos0;
      embedding_forward(ids.data(), table.data(), with_pos ? pos.data() : nullptr, y.data(), n,
                        steps, dim);
      embedding_backward(ids.data(), dy.data(), dtable.data(), with_pos ? dpos.data() : nullptr, n,
                         steps, dim);

      DeviceCopy<int32_t> d_ids(ids, stream_), d_order(index.order, stream_),
          d_seg_start(index.seg_start, stream_), d_seg_id(index.seg_id, stream_);
      DeviceCopy<float> d_table(table, stream_), d_pos(pos, stream_), d_dy(dy, stream_),
          d_dtable(dtable0, stream_), d_dpos(dpos0, stream_);
      DeviceBuffer<float> d_y(static_cast<std::size_t>(n * dim));
      embedding_forward_cuda(d_ids.get(), d_table.get(), with_pos ? d_pos.get() : nullptr,
                             d_y.get(), n, steps, dim, stream_);
      const EmbeddingGradIndexCuda d_index{d_order.get(), d_seg_start.get(), d_seg_id.get(),
                                           index.segments()};
      embedding_backward_cuda(d_index, d_dy.get(), d_dtable.get(),
                              with_pos ? d_dpos.get() : nullptr, n, steps, dim, stream_);
      std::vector<float> g_y, g_dtable, g_dpos;
      d_y.download(g_y, stream_);
      d_dtable.buf.download(g_dtable, stream_);
      d_dpos.buf.download(g_dpos, stream_);
      sync();

      if (!check_identical("embedding_forward", shape, g_y, y)) return;
      if (!check_identical("embedding_backward dtable", shape, g_dtable, dtable)) return;
      if (!check_identical("embedding_backward dpos", shape, g_dpos, dpos)) return;
    }
  }

  void gemm_vs_cpu_data() {
    QTest::addColumn<bool>("ta");
    QTest::addColumn<bool>("tb");
    QTest::addColumn<qint64>("m");
    QTest::addColumn<qint64>("n");
    QTest::addColumn<qint64>("k");
    QTest::addColumn<qint64>("batch");
    struct Mnk {
      qint64 m, n, k;
    };
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const Mnk s : {Mnk{1, 1, 1}, Mnk{7, 33, 5}, Mnk{65, 17, 129}, Mnk{300, 257, 64}})
          for (const qint64 batch : {1, 3})
            QTest::addRow("%s%s m=%lld n=%lld k=%lld batch=%lld", ta ? "T" : "N", tb ? "T" : "N",
                          static_cast<long long>(s.m), static_cast<long long>(s.n),
                          static_cast<long long>(s.k), static_cast<long long>(batch))
                << ta << tb << s.m << s.n << s.k << batch;
  }

  // batch 1: gemm_cuda; batch 3: gemm_strided_batched_cuda with strides that leave gaps. Every
  // matrix has a leading dimension larger than its row length (the padding must stay untouched).
  void gemm_vs_cpu() {
    QFETCH(bool, ta);
    QFETCH(bool, tb);
    QFETCH(qint64, m);
    QFETCH(qint64, n);
    QFETCH(qint64, k);
    QFETCH(qint64, batch);
    const Trans tra = ta ? Trans::Yes : Trans::No, trb = tb ? Trans::Yes : Trans::No;
    // Stored shapes (row-major): A is m x k, or k x m when transposed; B k x n, or n x k.
    const int64_t a_rows = ta ? k : m, a_cols = ta ? m : k;
    const int64_t b_rows = tb ? n : k, b_cols = tb ? k : n;
    const int64_t lda = a_cols + 3, ldb = b_cols + 2, ldc = n + 5;
    const int64_t stride_a = a_rows * lda + 7, stride_b = b_rows * ldb + 1, stride_c = m * ldc + 4;
    const auto seed = static_cast<uint32_t>(m * 1000 + n * 10 + k + batch + ta * 2 + tb) + 400;
    const auto a = randn(static_cast<std::size_t>(stride_a * batch), seed),
               b = randn(static_cast<std::size_t>(stride_b * batch), seed + 1),
               c0 = randn(static_cast<std::size_t>(stride_c * batch), seed + 2);
    const float alpha = 0.7f, beta = 0.3f;

    std::vector<float> c = c0;
    for (int64_t i = 0; i < batch; ++i)
      shardlab::kernels::gemm(tra, trb, m, n, k, alpha, a.data() + i * stride_a, lda,
                              b.data() + i * stride_b, ldb, beta, c.data() + i * stride_c, ldc);

    DeviceCopy<float> d_a(a, stream_), d_b(b, stream_), d_c(c0, stream_);
    if (batch == 1)
      gemm_cuda(cublas_, tra, trb, m, n, k, alpha, d_a.get(), lda, d_b.get(), ldb, beta, d_c.get(),
                ldc);
    else
      gemm_strided_batched_cuda(cublas_, tra, trb, m, n, k, alpha, d_a.get(), lda, stride_a,
                                d_b.get(), ldb, stride_b, beta, d_c.get(), ldc, stride_c, batch);
    std::vector<float> g_c;
    d_c.buf.download(g_c, stream_);
    sync();

    const QString shape = QStringLiteral("%1%2 m=%3 n=%4 k=%5 batch=%6")
                              .arg(ta ? "T" : "N", tb ? "T" : "N")
                              .arg(m)
                              .arg(n)
                              .arg(k)
                              .arg(batch);
    // The padding between rows and matrices is never written: equal to the input there.
    for (int64_t i = 0; i < batch; ++i)
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = n; j < ldc && r * ldc + j < stride_c; ++j) {
          const auto at = static_cast<std::size_t>(i * stride_c + r * ldc + j);
          QCOMPARE(g_c[at], c0[at]);
        }
    if (!check(batch == 1 ? "gemm" : "gemm_strided_batched", shape, max_norm_err(g_c, c), 1e-4))
      return;
  }

  void attention_vs_cpu_data() {
    QTest::addColumn<qint64>("steps");
    QTest::addColumn<qint64>("heads");
    QTest::addColumn<qint64>("head_dim");
    for (const qint64 steps : {1, 17, 64})
      for (const qint64 heads : {1, 4})
        for (const qint64 head_dim : {8, 16})
          QTest::addRow("B=2 T=%lld heads=%lld d=%lld", static_cast<long long>(steps),
                        static_cast<long long>(heads), static_cast<long long>(head_dim))
              << steps << heads << head_dim;
  }

  void attention_vs_cpu() {
    QFETCH(qint64, steps);
    QFETCH(qint64, heads);
    QFETCH(qint64, head_dim);
    AttentionDims dims;
    dims.batch = 2;
    dims.steps = steps;
    dims.heads = heads;
    dims.head_dim = head_dim;
    const int64_t B = dims.batch, T = steps, C = dims.width();
    const QString shape =
        QStringLiteral("B=%1 T=%2 heads=%3 d=%4").arg(B).arg(T).arg(heads).arg(head_dim);
    const auto seed = static_cast<uint32_t>(T * 100 + heads * 10 + head_dim) + 500;
    const auto n_qkv = static_cast<std::size_t>(B * T * 3 * C),
               n_att = static_cast<std::size_t>(B * T * C),
               n_probs = static_cast<std::size_t>(B * heads * T * T);
    const auto qkv = randn(n_qkv, seed, 0.0f, 1.5f), datt = randn(n_att, seed + 1);

    std::vector<float> probs(n_probs), att(n_att), dqkv(n_qkv),
        dscores(static_cast<std::size_t>(T * T));
    causal_attention_forward(dims, qkv.data(), probs.data(), att.data());
    causal_attention_backward(dims, qkv.data(), probs.data(), datt.data(), dqkv.data(),
                              dscores.data());

    DeviceCopy<float> d_qkv(qkv, stream_), d_datt(datt, stream_), d_cpu_probs(probs, stream_);
    DeviceBuffer<float> d_probs(n_probs), d_att(n_att), d_dqkv(n_qkv),
        d_dscores(static_cast<std::size_t>(heads * T * T));
    causal_attention_forward_cuda(dims, d_qkv.get(), d_probs.get(), d_att.get(), cublas_);
    // The backward from the CPU's probabilities: only the GEMMs' order differs.
    causal_attention_backward_cuda(dims, d_qkv.get(), d_cpu_probs.get(), d_datt.get(), d_dqkv.get(),
                                   d_dscores.get(), cublas_);
    std::vector<float> g_probs, g_att, g_dqkv;
    d_probs.download(g_probs, stream_);
    d_att.download(g_att, stream_);
    d_dqkv.download(g_dqkv, stream_);
    sync();

    // Exact zeros above the diagonal.
    for (int64_t bh = 0; bh < B * heads; ++bh)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = i + 1; j < T; ++j)
          QCOMPARE(std::bit_cast<uint32_t>(g_probs[static_cast<std::size_t>((bh * T + i) * T + j)]),
                   0u);
    if (!check("attention_forward probs", shape, max_norm_err(g_probs, probs), 1e-5)) return;
    if (!check("attention_forward att", shape, max_norm_err(g_att, att), 1e-4)) return;
    if (!check("attention_backward dqkv", shape, max_norm_err(g_dqkv, dqkv), 1e-4)) return;
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
    try {
      layer_norm_forward_cuda(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, -1, 8, 1e-5f,
                              stream_);
      QFAIL("no exception");
    } catch (const std::runtime_error& e) {
      QVERIFY2(std::string(e.what()).find("layer_norm_forward_cuda") != std::string::npos,
               e.what());
    }
    try {
      // lda smaller than the row length: cuBLAS answers CUBLAS_STATUS_INVALID_VALUE.
      gemm_cuda(cublas_, Trans::No, Trans::No, 4, 4, 4, 1.0f, nullptr, 1, nullptr, 4, 0.0f, nullptr,
                4);
      QFAIL("no exception");
    } catch (const std::runtime_error& e) {
      QVERIFY2(std::string(e.what()).find("cublasSgemm") != std::string::npos &&
                   std::string(e.what()).find("CUBLAS_STATUS_INVALID_VALUE") != std::string::npos,
               e.what());
    }
    try {
      gemm_cuda(cublas_, Trans::No, Trans::No, int64_t{1} << 32, 4, 4, 1.0f, nullptr, 4, nullptr, 4,
                0.0f, nullptr, 4);
      QFAIL("no exception");
    } catch (const std::runtime_error& e) {
      QVERIFY2(std::string(e.what()).find("gemm_cuda") != std::string::npos, e.what());
    }
  }
};

QTEST_APPLESS_MAIN(tst_KernelsCuda)
#include "tst_kernels_cuda.moc"
