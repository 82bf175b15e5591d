// Every CUDA kernel against its CPU reference on random data of several sizes, several steps,
// fp32 and with the bf16 copy (engine/doctor/kernel_checks.h). The same cases, data and
// tolerances as tst_kernels_cuda had before it called this function.
//
// The update kernels are built to round exactly as the CPU ones (same order of operations, no
// FMA, IEEE sqrt and division), so the expected error is 0; the tolerance (1e-6) leaves room for a
// CPU build that contracts to FMA (-march=native) without hiding a wrong formula.
//
// The layer kernels (element-wise, activations, layer norm, softmax cross-entropy, embedding,
// GEMM, attention, and tensor parallelism's vocab-parallel cross-entropy and range-masked
// embedding) are checked on random data at several shapes, odd ones included. Tolerances:
//  - 1e-5 element-wise relative (max_rel_err) for the element-wise ops, ReLU, layer norm,
//    softmax cross-entropy and vocab_xent's sum_exp and probs, which keep the CPU's order of
//    operations (expected error: 0, or the last bit of the device's exp/log in the softmax);
//  - 1e-5 normwise (max_norm_err: max |diff| / max |want|) where the device's tanhf or expf, or a
//    GEMM's different summation order, feeds a cancellation (GELU, attention probabilities):
//    one ulp of an intermediate is then large relative to a result near zero, but not to the
//    array's scale;
//  - 1e-4 normwise for the GEMM-based outputs (gemm, batched gemm, attention out and dqkv);
//  - bit-identical (figure: elements differing, bound 0) where the order of the additions is the
//    CPU's by construction: bias_grad, ReLU, the embedding forward and backward (also the
//    range-masked one), layer norm's dweight/dbias given the CPU's xhat, vocab_xent's row max,
//    target logit, backward and argmax; and for scale_cast (the same rounding, NaN == NaN).
//
// Every CUDA call is checked (a failure is an exception, which fails the case it happened in);
// every wait for the GPU is bounded (kWaitTimeout): a GPU that does not finish fails its case,
// and the remaining cases are not run. Device memory is owned by DeviceArray (freed on every
// path), except after such a timeout, when freeing would wait for the hung work without bound:
// the memory is then left to the process's exit.
#include "engine/doctor/kernel_checks.h"

#if SHARDLAB_HAVE_DEVICE_TRAINING

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/cuda_check.h"
#include "engine/core/device.h"
#include "engine/core/error.h"
#include "engine/device/cuda_context.h"
#include "engine/doctor/update_cases.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/range_embedding.h"
#include "kernels/cpu/scale_cast.h"
#include "kernels/cpu/softmax_xent.h"
#include "kernels/cpu/sq_norm.h"
#include "kernels/cpu/vocab_xent.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/adagrad_update.h"
#include "kernels/cuda/adam_update.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/layer_norm.h"
#include "kernels/cuda/range_embedding.h"
#include "kernels/cuda/rmsprop_update.h"
#include "kernels/cuda/scale_cast.h"
#include "kernels/cuda/sgd_update.h"
#include "kernels/cuda/softmax_xent.h"
#include "kernels/cuda/sq_norm.h"
#include "kernels/cuda/vocab_xent.h"

#endif  // SHARDLAB_HAVE_DEVICE_TRAINING

namespace shardlab::doctor {

namespace {
constexpr const char* kGroup = "kernels";
}  // namespace

#if SHARDLAB_HAVE_DEVICE_TRAINING

namespace {

namespace k = shardlab::kernels;

// The longest wait for the GPU to finish one case's queued work (the largest case, 2^24 floats
// of sq_norm or 3 steps of an update on 2^20 elements, takes milliseconds).
constexpr double kWaitTimeout = 60.0;

// The optimizer updates: same rounding as the CPU, expected 0; see the file comment.
constexpr double kUpdateTol = 1e-6;
constexpr int64_t kSteps = 3;
const std::vector<int64_t> kSizes{1, 1000, (1 << 20) + 3};
// The layer kernels; see the file comment.
constexpr double kSameOrderTol = 1e-5;   // max rel err, the CPU's order of operations
constexpr double kCancellingTol = 1e-5;  // max norm err, device tanhf/expf into a cancellation
constexpr double kGemmTol = 1e-4;        // max norm err, cuBLAS's summation order
constexpr double kRowLossTol = 1e-12;    // max rel err of the doubles of softmax_xent's row loss

const char* const kUpdateNote =
    "same rounding as the CPU (no FMA, IEEE sqrt and division): expected 0; the bound allows a "
    "CPU build that contracts to FMA";
const char* const kSameOrderNote =
    "the CPU's order of operations: expected 0, or the last bits of the device's exp/log";
const char* const kCancellingNote =
    "max |diff| / max |want|: the device's tanhf/expf or a GEMM's order feeds a cancellation, "
    "judged at the array's scale";
const char* const kGemmNote = "max |diff| / max |want|: cuBLAS sums in another order than the CPU";
const char* const kIdenticalNote =
    "bit-identical required: the CPU's order of operations by construction";

// The context the checks run on: device, stream, cuBLAS handle, and whether a wait timed out
// ("wedged": work queued on the stream may never finish, so nothing may wait for it again).
class Gpu {
 public:
  explicit Gpu(int device) : ctx_(std::make_unique<CudaContext>(device)) {}
  ~Gpu() {
    // cublasDestroy waits for the device without a bound: leave a wedged context to the
    // process's exit.
    if (wedged_) (void)ctx_.release();
  }
  Gpu(const Gpu&) = delete;
  Gpu& operator=(const Gpu&) = delete;

  cudaStream_t stream() const { return ctx_->stream(); }
  cublasHandle_t cublas() const { return ctx_->cublas(); }
  bool wedged() const { return wedged_; }

  // Waits (bounded) for everything queued on the stream; throws TimeoutError naming `what` after
  // kWaitTimeout, DeviceError when the queued work failed.
  void sync(const std::string& what) {
    if (wedged_) SL_THROW(TimeoutError, "{}: the GPU is still busy with work that timed out", what);
    try {
      ctx_->sync(what.c_str(), kWaitTimeout);
    } catch (const TimeoutError&) {
      wedged_ = true;
      throw;
    }
  }

  // For destructors: true when nothing is left running on the stream (finished or failed), so
  // that cudaFree (which waits for the device) returns; false when the GPU is wedged.
  bool settle() noexcept {
    if (wedged_) return false;
    try {
      ctx_->sync("releasing device memory", kWaitTimeout);
    } catch (const TimeoutError&) {
      wedged_ = true;
      return false;
    } catch (...) {
      // The queued work failed: it is no longer running.
    }
    return true;
  }

 private:
  std::unique_ptr<CudaContext> ctx_;
  bool wedged_ = false;
};

// A device array of n T's (uninitialised), freed when it goes (unless the GPU is wedged).
template <class T>
class DeviceArray {
 public:
  DeviceArray(Gpu& gpu, std::size_t n) : gpu_(&gpu), n_(n) {
    if (n_ > 0) SL_CUDA_CHECK(cudaMalloc(&p_, n_ * sizeof(T)), "cudaMalloc");
  }
  // A device copy of `v` (the upload is queued on the stream).
  DeviceArray(Gpu& gpu, const std::vector<T>& v) : DeviceArray(gpu, v.size()) { upload(v); }
  ~DeviceArray() {
    if (p_ != nullptr && gpu_->settle()) (void)cudaFree(p_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return static_cast<T*>(p_); }

  // Uploads and downloads are queued on the stream. The checks only copy while the stream is
  // idle (after a bounded sync), so a copy from or to pageable memory, which the runtime may
  // perform synchronously, never waits for a kernel.
  void upload(const std::vector<T>& v) const {
    if (v.size() != n_)
      SL_THROW(InternalError, "upload of {} elements into a device array of {}", v.size(), n_);
    if (n_ > 0)
      SL_CUDA_CHECK(
          cudaMemcpyAsync(p_, v.data(), n_ * sizeof(T), cudaMemcpyHostToDevice, gpu_->stream()),
          "cudaMemcpyAsync (host to device)");
  }
  void download(std::vector<T>& v) const {
    v.resize(n_);
    if (n_ > 0)
      SL_CUDA_CHECK(
          cudaMemcpyAsync(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost, gpu_->stream()),
          "cudaMemcpyAsync (device to host)");
  }

 private:
  Gpu* gpu_;
  void* p_ = nullptr;
  std::size_t n_;
};

// max_i |got - want| / max(|want_i|, 1e-3 * max_j |want_j|): relative where values are of the
// array's scale, absolute-at-that-scale for the few elements near zero (where one ulp of an
// intermediate would otherwise read as a large relative error). Infinite on a size mismatch.
template <class T>
double max_rel_err(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double scale = 0;
  for (const T w : want) scale = std::max(scale, std::fabs(static_cast<double>(w)));
  const double floor = std::max(1e-3 * scale, std::numeric_limits<double>::min());
  double err = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto w = static_cast<double>(want[i]);
    const double d = std::fabs(static_cast<double>(got[i]) - w);
    // NaN in got (or want) is an infinite error, not one that max() would drop.
    err = std::isnan(d) ? std::numeric_limits<double>::infinity()
                        : std::max(err, d / std::max(std::fabs(w), floor));
  }
  return err;
}

// max_i |got - want| / max_j |want_j| (0 when both are all zeros): the error at the array's
// scale, for results that cancel (GEMMs, GELU's 1 + t near t = -1).
double max_norm_err(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double scale = 0, diff = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    diff = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(diff, d);
  }
  return diff == 0 ? 0.0 : diff / std::max(scale, std::numeric_limits<double>::min());
}

// The number of elements whose bits differ (a size mismatch counts the missing ones).
std::size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  const std::size_t n = std::min(a.size(), b.size());
  std::size_t bad = std::max(a.size(), b.size()) - n;
  for (std::size_t i = 0; i < n; ++i)
    bad += std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i]) ? 1 : 0;
  return bad;
}

std::vector<float> randn(std::size_t n, uint32_t seed, float mean = 0.0f, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(mean, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

bool same_bf16(uint16_t a, uint16_t b) {
  const bool nan_a = std::isnan(k::bf16_to_float(a)), nan_b = std::isnan(k::bf16_to_float(b));
  return nan_a || nan_b ? nan_a && nan_b : a == b;
}

CheckResult rel_check(const std::string& name, double err, double tol, const char* note) {
  return bounded(kGroup, name, "max rel err", err, tol, note);
}

CheckResult norm_check(const std::string& name, const std::vector<float>& got,
                       const std::vector<float>& want, double tol, const char* note) {
  return bounded(kGroup, name, "max norm err", max_norm_err(got, want), tol, note);
}

CheckResult identical_check(const std::string& name, const std::vector<float>& got,
                            const std::vector<float>& want) {
  const std::size_t bad = differing(got, want);
  std::string detail = kIdenticalNote;
  if (bad > 0) detail += fmt::format("; max rel err {:.3g}", max_rel_err(got, want));
  return bounded(kGroup, name, "elements differing", static_cast<double>(bad), 0, detail);
}

struct CudaRun {
  cudaStream_t stream;
  void operator()(const k::SgdArgs& a) const { k::sgd_update_cuda(a, stream); }
  void operator()(const k::AdamArgs& a) const { k::adam_update_cuda(a, stream); }
  void operator()(const k::RmspropArgs& a) const { k::rmsprop_update_cuda(a, stream); }
  void operator()(const k::AdagradArgs& a) const { k::adagrad_update_cuda(a, stream); }
};

// Runs the cases one by one: a case that throws is one failed check (the checks it appended
// before stay); after a wait that timed out, or an error that leaves the stream unusable, the
// remaining cases are not run and one failed check says how many and why.
class Runner {
 public:
  Runner(Gpu& gpu, CheckList& out) : gpu_(gpu), out_(out) {}

  template <class Body>
  void run(const std::string& name, Body&& body) {
    if (!stop_reason_.empty()) {
      ++not_run_;
      return;
    }
    bool threw = true;
    guarded(out_, kGroup, name, [&](CheckList& out) {
      body(out);
      threw = false;
    });
    if (!threw) return;
    if (gpu_.wedged()) {
      stop_reason_ = fmt::format("the GPU did not finish \"{}\" within {} s", name, kWaitTimeout);
      return;
    }
    // A sticky error (an illegal address, a lost device) comes back from every later call.
    const cudaError_t state = cudaStreamQuery(gpu_.stream());
    if (state != cudaSuccess && state != cudaErrorNotReady)
      stop_reason_ = fmt::format("the CUDA context is unusable after \"{}\": {}", name,
                                 cuda_error_text(static_cast<int>(state)));
  }

  void finish() {
    if (not_run_ > 0)
      out_.push_back(failed(kGroup, "remaining kernel checks",
                            fmt::format("{} cases were not run: {}", not_run_, stop_reason_)));
  }

 private:
  Gpu& gpu_;
  CheckList& out_;
  std::string stop_reason_;
  int not_run_ = 0;
};

// ---- the optimizer updates ----

void update_case(Gpu& gpu, CheckList& out, updates::Op op, int64_t n, bool bf16,
                 const std::string& name, const std::string& copy_name) {
  const auto seed = static_cast<uint32_t>(1000 + static_cast<int>(op) * 10 + (n % 7));

  auto cpu = updates::make_state(op, n, seed);
  auto dev = updates::make_state(op, n, seed);
  updates::cpu_steps(op, cpu, seed, kSteps, bf16);

  const auto size = static_cast<std::size_t>(n);
  DeviceArray<float> p(gpu, dev.param), g(gpu, size), s1(gpu, dev.s1), s2(gpu, dev.s2);
  DeviceArray<uint16_t> pb(gpu, size);
  for (int64_t t = 1; t <= kSteps; ++t) {
    updates::fill_grad(dev.grad, seed, t);
    g.upload(dev.grad);
    updates::dispatch(
        op, updates::Buffers{p.get(), g.get(), s1.get(), s2.get(), bf16 ? pb.get() : nullptr, n}, t,
        CudaRun{gpu.stream()});
    // The grad upload reads host memory that the next fill_grad overwrites: wait for it.
    gpu.sync(fmt::format("{} step {}", name, t));
  }
  p.download(dev.param);
  s1.download(dev.s1);
  s2.download(dev.s2);
  pb.download(dev.bf16);
  gpu.sync(name + " (download)");

  const double err = std::max({max_rel_err(dev.param, cpu.param), max_rel_err(dev.s1, cpu.s1),
                               max_rel_err(dev.s2, cpu.s2)});
  const bool identical = dev.param == cpu.param && dev.s1 == cpu.s1 && dev.s2 == cpu.s2;
  out.push_back(bounded(kGroup, name, "max rel err", err, kUpdateTol,
                        fmt::format("{}; params and state {}bit-identical to the CPU's",
                                    kUpdateNote, identical ? "" : "not ")));
  if (bf16) {
    // The device copy is the device master rounded to nearest even, bit for bit; where the
    // masters agree bit for bit, so do the copies.
    std::size_t bad = 0;
    for (std::size_t i = 0; i < size; ++i)
      if (!same_bf16(dev.bf16[i], k::float_to_bf16(dev.param[i])) ||
          (dev.param[i] == cpu.param[i] && !same_bf16(dev.bf16[i], cpu.bf16[i])))
        ++bad;
    out.push_back(bounded(kGroup, copy_name, "elements differing", static_cast<double>(bad), 0,
                          "the bf16 copy must be the device master rounded to nearest even, and "
                          "the CPU's copy wherever the masters agree (bitwise, NaN == NaN)"));
  }
}

void update_checks(Gpu& gpu, Runner& runner) {
  for (const auto op : updates::all_ops())
    for (const int64_t n : kSizes)
      for (const bool bf16 : {false, true}) {
        const std::string op_name = updates::op_name(op) + "_update";
        const std::string name =
            fmt::format("{} {} n={} steps={}", op_name, bf16 ? "bf16" : "fp32", n, kSteps);
        const std::string copy_name = fmt::format("{} bf16-copy n={} steps={}", op_name, n, kSteps);
        runner.run(name,
                   [&](CheckList& out) { update_case(gpu, out, op, n, bf16, name, copy_name); });
      }
}

// ---- scale_cast and sq_norm ----

void scale_cast_case(Gpu& gpu, CheckList& out, int64_t n, const std::string& name) {
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
  k::scale_cast_to_bf16(in.data(), want_bf.data(), n, scale);
  k::scale_cast_from_bf16(want_bf.data(), want_back.data(), n, 1.0f / 1024);

  DeviceArray<float> d_in(gpu, in), d_back(gpu, size);
  DeviceArray<uint16_t> d_bf(gpu, size);
  k::scale_cast_to_bf16_cuda(d_in.get(), d_bf.get(), n, scale, gpu.stream());
  k::scale_cast_from_bf16_cuda(d_bf.get(), d_back.get(), n, 1.0f / 1024, gpu.stream());
  gpu.sync(name);
  d_bf.download(got_bf);
  d_back.download(got_back);
  gpu.sync(name + " (download)");

  std::size_t bad = 0;
  for (std::size_t i = 0; i < size; ++i) {
    if (!same_bf16(got_bf[i], want_bf[i])) ++bad;
    const bool nan_g = std::isnan(got_back[i]), nan_w = std::isnan(want_back[i]);
    if (nan_g != nan_w || (!nan_w && got_back[i] != want_back[i])) ++bad;
  }
  out.push_back(bounded(kGroup, name, "elements differing", static_cast<double>(bad), 0,
                        fmt::format("bitwise (NaN == NaN) over the {} values to bf16 and back, "
                                    "ties, infinities, NaN, subnormals and overflow included",
                                    2 * size)));
}

void sq_norm_case(Gpu& gpu, CheckList& out, int64_t n, const std::string& name,
                  const std::string& rerun_name) {
  const auto size = static_cast<std::size_t>(n);
  std::mt19937 rng(static_cast<uint32_t>(n) + 5);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> x(size);
  for (auto& v : x) v = d(rng);
  const double want = k::sq_norm(x.data(), n);

  DeviceArray<float> d_x(gpu, x);
  DeviceArray<double> d_out(gpu, 2);
  k::sq_norm_cuda(d_x.get(), n, d_out.get(), gpu.stream());
  k::sq_norm_cuda(d_x.get(), n, d_out.get() + 1, gpu.stream());
  gpu.sync(name);
  std::vector<double> got;
  d_out.download(got);
  gpu.sync(name + " (download)");

  const double err = want == 0 ? std::fabs(got[0]) : std::fabs(got[0] - want) / want;
  // The CPU adds left to right, whose rounding error grows up to ~n u (u = 2^-53) relative; the
  // GPU's tree is more accurate (measured on a CPU emulation of the kernel: 1.3e-12 from the CPU
  // at n = 2^24 + 1, and equal to a compensated sum). Allow the CPU's bound, 2 n u.
  const double tol = std::max(1e-15, 2.0 * static_cast<double>(n) * std::ldexp(1.0, -53));
  out.push_back(bounded(kGroup, name, "rel err", err, tol,
                        fmt::format("GPU {:.17g} vs CPU {:.17g}; bound: the CPU's left-to-right "
                                    "sum's error bound, 2 n 2^-53",
                                    got[0], want)));
  const bool same = std::bit_cast<uint64_t>(got[1]) == std::bit_cast<uint64_t>(got[0]);
  out.push_back(bounded(
      kGroup, rerun_name, "runs differing", same ? 0.0 : 1.0, 0,
      same ? "two runs on the same data gave the same bits (deterministic)"
           : fmt::format("two runs on the same data gave {:.17g} and {:.17g}", got[0], got[1])));
}

void scale_cast_and_sq_norm_checks(Gpu& gpu, Runner& runner) {
  for (const int64_t n : kSizes) {
    const std::string name = fmt::format("scale_cast n={}", n);
    runner.run(name, [&](CheckList& out) { scale_cast_case(gpu, out, n, name); });
  }
  for (const int64_t n :
       {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{(1 << 20) + 3}, int64_t{(1 << 24) + 1}}) {
    const std::string name = fmt::format("sq_norm n={}", n);
    const std::string rerun_name = fmt::format("sq_norm rerun n={}", n);
    runner.run(name, [&](CheckList& out) { sq_norm_case(gpu, out, n, name, rerun_name); });
  }
}

// ---- the layer kernels ----

const int64_t kRows[] = {1, 7, 1000};
const int64_t kCols[] = {1, 33, 768};

void elementwise_case(Gpu& gpu, CheckList& out, int64_t rows, int64_t cols) {
  const std::string shape = fmt::format("{}x{}", rows, cols);
  const auto n = static_cast<std::size_t>(rows * cols);
  const auto seed = static_cast<uint32_t>(rows * 131 + cols);
  const auto a = randn(n, seed), b = randn(n, seed + 1),
             bias = randn(static_cast<std::size_t>(cols), seed + 2),
             dbias0 = randn(static_cast<std::size_t>(cols), seed + 3);
  const float s = 0.37f;

  std::vector<float> sum(n), scaled = a, biased = a, dbias = dbias0;
  k::add(a.data(), b.data(), sum.data(), rows * cols);
  k::scale(scaled.data(), rows * cols, s);
  k::bias_add(biased.data(), bias.data(), rows, cols);
  k::bias_grad(a.data(), dbias.data(), rows, cols);

  DeviceArray<float> d_a(gpu, a), d_b(gpu, b), d_bias(gpu, bias), d_dbias(gpu, dbias0),
      d_scaled(gpu, a), d_biased(gpu, a), d_sum(gpu, n);
  const cudaStream_t st = gpu.stream();
  k::add_cuda(d_a.get(), d_b.get(), d_sum.get(), rows * cols, st);
  k::scale_cuda(d_scaled.get(), rows * cols, s, st);
  k::bias_add_cuda(d_biased.get(), d_bias.get(), rows, cols, st);
  k::bias_grad_cuda(d_a.get(), d_dbias.get(), rows, cols, st);
  gpu.sync("elementwise " + shape);
  std::vector<float> g_sum, g_scaled, g_biased, g_dbias;
  d_sum.download(g_sum);
  d_scaled.download(g_scaled);
  d_biased.download(g_biased);
  d_dbias.download(g_dbias);
  gpu.sync("elementwise " + shape + " (download)");

  out.push_back(rel_check("add " + shape, max_rel_err(g_sum, sum), kSameOrderTol, kSameOrderNote));
  out.push_back(
      rel_check("scale " + shape, max_rel_err(g_scaled, scaled), kSameOrderTol, kSameOrderNote));
  out.push_back(
      rel_check("bias_add " + shape, max_rel_err(g_biased, biased), kSameOrderTol, kSameOrderNote));
  out.push_back(identical_check("bias_grad " + shape, g_dbias, dbias));
}

void activations_case(Gpu& gpu, CheckList& out, int64_t n) {
  const std::string shape = fmt::format("n={}", n);
  const auto size = static_cast<std::size_t>(n);
  auto x = randn(size, static_cast<uint32_t>(n) + 11, 0.0f, 3.0f);
  if (size >= 3) {
    x[1] = 0.0f;
    x[2] = -0.0f;
  }
  const auto dy = randn(size, static_cast<uint32_t>(n) + 12);

  std::vector<float> relu_y(size), relu_dx(size), gelu_y(size), gelu_t(size), gelu_dx_t(size),
      gelu_dx(size);
  k::relu_forward(x.data(), relu_y.data(), n);
  k::relu_backward(relu_y.data(), dy.data(), relu_dx.data(), n);
  k::gelu_forward(x.data(), gelu_y.data(), gelu_t.data(), n);
  k::gelu_backward(x.data(), gelu_t.data(), dy.data(), gelu_dx_t.data(), n);
  k::gelu_backward(x.data(), nullptr, dy.data(), gelu_dx.data(), n);

  DeviceArray<float> d_x(gpu, x), d_dy(gpu, dy), d_relu_y(gpu, relu_y), d_cpu_t(gpu, gelu_t);
  DeviceArray<float> d_ry(gpu, size), d_rdx(gpu, size), d_gy(gpu, size), d_gt(gpu, size),
      d_gdx_t(gpu, size), d_gdx(gpu, size);
  const cudaStream_t st = gpu.stream();
  k::relu_forward_cuda(d_x.get(), d_ry.get(), n, st);
  k::relu_backward_cuda(d_relu_y.get(), d_dy.get(), d_rdx.get(), n, st);
  k::gelu_forward_cuda(d_x.get(), d_gy.get(), d_gt.get(), n, st);
  // With the CPU's t, the backward is the same float arithmetic: expected bit-identical.
  k::gelu_backward_cuda(d_x.get(), d_cpu_t.get(), d_dy.get(), d_gdx_t.get(), n, st);
  k::gelu_backward_cuda(d_x.get(), nullptr, d_dy.get(), d_gdx.get(), n, st);
  gpu.sync("activations " + shape);
  std::vector<float> g_ry, g_rdx, g_gy, g_gt, g_gdx_t, g_gdx;
  d_ry.download(g_ry);
  d_rdx.download(g_rdx);
  d_gy.download(g_gy);
  d_gt.download(g_gt);
  d_gdx_t.download(g_gdx_t);
  d_gdx.download(g_gdx);
  gpu.sync("activations " + shape + " (download)");

  out.push_back(identical_check("relu_forward " + shape, g_ry, relu_y));
  out.push_back(identical_check("relu_backward " + shape, g_rdx, relu_dx));
  // The device's tanhf is not glibc's: a few ulp on t, then cancellation in 1 + t.
  out.push_back(
      norm_check("gelu_forward tanh " + shape, g_gt, gelu_t, kCancellingTol, kCancellingNote));
  out.push_back(norm_check("gelu_forward " + shape, g_gy, gelu_y, kCancellingTol, kCancellingNote));
  out.push_back(rel_check("gelu_backward (t given) " + shape, max_rel_err(g_gdx_t, gelu_dx_t),
                          kSameOrderTol, kSameOrderNote));
  out.push_back(norm_check("gelu_backward (t recomputed) " + shape, g_gdx, gelu_dx, kCancellingTol,
                           kCancellingNote));
}

void layer_norm_case(Gpu& gpu, CheckList& out, int64_t rows, int64_t dim) {
  const std::string shape = fmt::format("{}x{}", rows, dim);
  const auto n = static_cast<std::size_t>(rows * dim);
  const auto d = static_cast<std::size_t>(dim);
  const auto seed = static_cast<uint32_t>(rows * 7 + dim) + 100;
  // |mean| >> std in places, as the two-pass variance is there for.
  const auto x = randn(n, seed, 5.0f, 2.0f), w = randn(d, seed + 1, 1.0f, 0.5f),
             b = randn(d, seed + 2), dy = randn(n, seed + 3), dw0 = randn(d, seed + 4),
             db0 = randn(d, seed + 5);
  const float eps = 1e-5f;

  std::vector<float> y(n), xhat(n), rstd(static_cast<std::size_t>(rows)), dx(n), dw = dw0, db = db0;
  k::layer_norm_forward(x.data(), w.data(), b.data(), y.data(), xhat.data(), rstd.data(), rows, dim,
                        eps);
  k::layer_norm_backward(dy.data(), xhat.data(), rstd.data(), w.data(), dx.data(), dw.data(),
                         db.data(), rows, dim);

  DeviceArray<float> d_x(gpu, x), d_w(gpu, w), d_b(gpu, b), d_dy(gpu, dy), d_dw(gpu, dw0),
      d_db(gpu, db0), d_cpu_xhat(gpu, xhat), d_cpu_rstd(gpu, rstd);
  DeviceArray<float> d_y(gpu, n), d_xhat(gpu, n), d_rstd(gpu, static_cast<std::size_t>(rows)),
      d_dx(gpu, n);
  const cudaStream_t st = gpu.stream();
  k::layer_norm_forward_cuda(d_x.get(), d_w.get(), d_b.get(), d_y.get(), d_xhat.get(), d_rstd.get(),
                             rows, dim, eps, st);
  // The backward from the CPU's xhat and rstd: the same inputs, so the same sums.
  k::layer_norm_backward_cuda(d_dy.get(), d_cpu_xhat.get(), d_cpu_rstd.get(), d_w.get(), d_dx.get(),
                              d_dw.get(), d_db.get(), rows, dim, st);
  gpu.sync("layer_norm " + shape);
  std::vector<float> g_y, g_xhat, g_rstd, g_dx, g_dw, g_db;
  d_y.download(g_y);
  d_xhat.download(g_xhat);
  d_rstd.download(g_rstd);
  d_dx.download(g_dx);
  d_dw.download(g_dw);
  d_db.download(g_db);
  gpu.sync("layer_norm " + shape + " (download)");

  out.push_back(rel_check("layer_norm_forward y " + shape, max_rel_err(g_y, y), kSameOrderTol,
                          kSameOrderNote));
  out.push_back(rel_check("layer_norm_forward xhat " + shape, max_rel_err(g_xhat, xhat),
                          kSameOrderTol, kSameOrderNote));
  out.push_back(rel_check("layer_norm_forward rstd " + shape, max_rel_err(g_rstd, rstd),
                          kSameOrderTol, kSameOrderNote));
  out.push_back(rel_check("layer_norm_backward dx " + shape, max_rel_err(g_dx, dx), kSameOrderTol,
                          kSameOrderNote));
  out.push_back(identical_check("layer_norm_backward dweight " + shape, g_dw, dw));
  out.push_back(identical_check("layer_norm_backward dbias " + shape, g_db, db));
}

void softmax_xent_case(Gpu& gpu, CheckList& out, int64_t rows, int64_t classes) {
  const std::string shape = fmt::format("{}x{}", rows, classes);
  const auto n = static_cast<std::size_t>(rows * classes);
  const auto r = static_cast<std::size_t>(rows);
  const auto seed = static_cast<uint32_t>(rows * 3 + classes) + 200;
  auto logits = randn(n, seed, 0.0f, 3.0f);
  std::vector<int32_t> targets(r);
  std::mt19937 rng(seed + 1);
  for (auto& t : targets) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(classes));
  // Row 0: a tie for the maximum at columns 0 and 1 (the first one counts) and the target on
  // it, so row_correct sees a 1.
  if (classes >= 2) {
    logits[0] = logits[1] = 20.0f;
    targets[0] = 0;
  }

  std::vector<float> probs(n), dlogits(n);
  std::vector<double> loss(r);
  std::vector<int32_t> correct(r);
  const float scale = 1.0f / static_cast<float>(rows);
  k::softmax_xent_forward(logits.data(), targets.data(), probs.data(), loss.data(), correct.data(),
                          rows, classes);
  k::softmax_xent_backward(probs.data(), targets.data(), dlogits.data(), rows, classes, scale);

  DeviceArray<float> d_logits(gpu, logits), d_cpu_probs(gpu, probs), d_probs(gpu, n),
      d_dlogits(gpu, n);
  DeviceArray<int32_t> d_targets(gpu, targets), d_correct(gpu, r);
  DeviceArray<double> d_loss(gpu, r);
  const cudaStream_t st = gpu.stream();
  k::softmax_xent_forward_cuda(d_logits.get(), d_targets.get(), d_probs.get(), d_loss.get(),
                               d_correct.get(), rows, classes, st);
  k::softmax_xent_backward_cuda(d_cpu_probs.get(), d_targets.get(), d_dlogits.get(), rows, classes,
                                scale, st);
  gpu.sync("softmax_xent " + shape);
  std::vector<float> g_probs, g_dlogits;
  std::vector<double> g_loss;
  std::vector<int32_t> g_correct;
  d_probs.download(g_probs);
  d_dlogits.download(g_dlogits);
  d_loss.download(g_loss);
  d_correct.download(g_correct);
  gpu.sync("softmax_xent " + shape + " (download)");

  out.push_back(rel_check("softmax_xent_forward probs " + shape, max_rel_err(g_probs, probs),
                          kSameOrderTol, kSameOrderNote));
  // Doubles: only the device's exp and log differ from glibc's (last bits).
  out.push_back(
      rel_check("softmax_xent_forward row_loss " + shape, max_rel_err(g_loss, loss), kRowLossTol,
                "doubles: only the device's exp and log differ from glibc's (last bits)"));
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < r; ++i) wrong += g_correct[i] != correct[i] ? 1 : 0;
  out.push_back(bounded(kGroup, "softmax_xent_forward row_correct " + shape, "rows differing",
                        static_cast<double>(wrong), 0,
                        "the argmax hit per row must match the CPU's (ties: the first column)"));
  out.push_back(rel_check("softmax_xent_backward " + shape, max_rel_err(g_dlogits, dlogits),
                          kSameOrderTol, kSameOrderNote));
}

void embedding_case(Gpu& gpu, CheckList& out, int64_t vocab, int64_t dim) {
  const int64_t batch = 3, steps = 17, n = batch * steps;
  const auto seed = static_cast<uint32_t>(vocab * 5 + dim) + 300;
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(static_cast<std::size_t>(n));
  // Half the ids from a handful of values: repeated ids, several rows per segment.
  for (auto& id : ids)
    id = static_cast<int32_t>(rng() % 2
                                  ? rng() % static_cast<uint32_t>(vocab)
                                  : rng() % static_cast<uint32_t>(std::min<int64_t>(vocab, 5)));
  const auto table = randn(static_cast<std::size_t>(vocab * dim), seed + 1),
             pos = randn(static_cast<std::size_t>(steps * dim), seed + 2),
             dy = randn(static_cast<std::size_t>(n * dim), seed + 3),
             dtable0 = randn(static_cast<std::size_t>(vocab * dim), seed + 4),
             dpos0 = randn(static_cast<std::size_t>(steps * dim), seed + 5);
  const k::EmbeddingGradIndex index = k::embedding_grad_index(ids.data(), n, vocab);

  for (const bool with_pos : {false, true}) {
    const std::string shape = fmt::format("vocab={} dim={} n={} {}", vocab, dim, n,
                                          with_pos ? "with positions" : "no positions");
    std::vector<float> y(static_cast<std::size_t>(n * dim)), dtable = dtable0, dpos = dpos0;
    k::embedding_forward(ids.data(), table.data(), with_pos ? pos.data() : nullptr, y.data(), n,
                         steps, dim);
    k::embedding_backward(ids.data(), dy.data(), dtable.data(), with_pos ? dpos.data() : nullptr, n,
                          steps, dim);

    DeviceArray<int32_t> d_ids(gpu, ids), d_order(gpu, index.order),
        d_seg_start(gpu, index.seg_start), d_seg_id(gpu, index.seg_id);
    DeviceArray<float> d_table(gpu, table), d_pos(gpu, pos), d_dy(gpu, dy), d_dtable(gpu, dtable0),
        d_dpos(gpu, dpos0), d_y(gpu, static_cast<std::size_t>(n * dim));
    const cudaStream_t st = gpu.stream();
    k::embedding_forward_cuda(d_ids.get(), d_table.get(), with_pos ? d_pos.get() : nullptr,
                              d_y.get(), n, steps, dim, st);
    const k::EmbeddingGradIndexCuda d_index{d_order.get(), d_seg_start.get(), d_seg_id.get(),
                                            index.segments()};
    k::embedding_backward_cuda(d_index, d_dy.get(), d_dtable.get(),
                               with_pos ? d_dpos.get() : nullptr, n, steps, dim, st);
    gpu.sync("embedding " + shape);
    std::vector<float> g_y, g_dtable, g_dpos;
    d_y.download(g_y);
    d_dtable.download(g_dtable);
    d_dpos.download(g_dpos);
    gpu.sync("embedding " + shape + " (download)");

    out.push_back(identical_check("embedding_forward " + shape, g_y, y));
    out.push_back(identical_check("embedding_backward dtable " + shape, g_dtable, dtable));
    out.push_back(identical_check("embedding_backward dpos " + shape, g_dpos, dpos));
  }
}

// One rank's slice of the vocabulary-parallel cross-entropy: columns [vocab_begin, vocab_begin +
// cols) of a vocabulary of vocab_begin + cols + 7 ids (cols may be 0). Each op is run on the same
// inputs as its CPU reference (the all-reduced values between them are stand-ins built on the
// host), so each is judged alone.
void vocab_xent_case(Gpu& gpu, CheckList& out, int64_t rows, int64_t cols) {
  const int64_t vocab_begin = 2 * cols + 1;
  const std::string shape = fmt::format("{}x{} at {}", rows, cols, vocab_begin);
  const auto n = static_cast<std::size_t>(rows * cols);
  const auto r = static_cast<std::size_t>(rows);
  const auto seed = static_cast<uint32_t>(rows * 3 + cols) + 600;
  auto logits = randn(n, seed, 0.0f, 3.0f);
  std::vector<int32_t> targets(r);
  std::mt19937 rng(seed + 1);
  for (auto& t : targets) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(3 * cols + 8));
  // Row 0: a tie for the maximum at columns 0 and 1 (the lower id counts), its target held here.
  if (cols >= 2) {
    logits[0] = logits[1] = 20.0f;
    targets[0] = static_cast<int32_t>(vocab_begin);
  }

  // CPU, with stand-ins for the all-reduces: a larger maximum on odd rows (held elsewhere), and
  // sums and target logits that other ranks added to.
  std::vector<float> local_max(r), mx(r), sum(r), target(r), probs(n), dlogits(n), neg_best(r);
  std::vector<double> loss(r);
  k::vocab_xent_row_max(logits.data(), local_max.data(), rows, cols);
  const auto other = randn(r, seed + 2);
  for (std::size_t i = 0; i < r; ++i)
    mx[i] = i % 2 == 1 || std::isinf(local_max[i]) ? std::max(local_max[i], 7.0f + other[i])
                                                   : local_max[i];
  k::vocab_xent_partials(logits.data(), mx.data(), targets.data(), vocab_begin, sum.data(),
                         target.data(), rows, cols);
  std::vector<float> all_sum = sum, all_target = target;
  for (std::size_t i = 0; i < r; ++i) {
    all_sum[i] += 0.5f + std::fabs(other[i]);
    if (all_target[i] == 0.0f) all_target[i] = other[i];
  }
  k::vocab_xent_probs(logits.data(), mx.data(), all_sum.data(), all_target.data(), probs.data(),
                      loss.data(), rows, cols);
  const float inv_rows = 1.0f / static_cast<float>(rows);
  k::vocab_xent_backward(probs.data(), targets.data(), vocab_begin, dlogits.data(), rows, cols,
                         inv_rows);
  k::vocab_xent_argmax_neg_id(logits.data(), mx.data(), vocab_begin, neg_best.data(), rows, cols);

  DeviceArray<float> d_logits(gpu, logits), d_mx(gpu, mx), d_all_sum(gpu, all_sum),
      d_all_target(gpu, all_target), d_cpu_probs(gpu, probs), d_local_max(gpu, r), d_sum(gpu, r),
      d_target(gpu, r), d_probs(gpu, n), d_dlogits(gpu, n), d_neg_best(gpu, r);
  DeviceArray<int32_t> d_targets(gpu, targets);
  DeviceArray<double> d_loss(gpu, r);
  const cudaStream_t st = gpu.stream();
  k::vocab_xent_row_max_cuda(d_logits.get(), d_local_max.get(), rows, cols, st);
  k::vocab_xent_partials_cuda(d_logits.get(), d_mx.get(), d_targets.get(), vocab_begin, d_sum.get(),
                              d_target.get(), rows, cols, st);
  k::vocab_xent_probs_cuda(d_logits.get(), d_mx.get(), d_all_sum.get(), d_all_target.get(),
                           d_probs.get(), d_loss.get(), rows, cols, st);
  k::vocab_xent_backward_cuda(d_cpu_probs.get(), d_targets.get(), vocab_begin, d_dlogits.get(),
                              rows, cols, inv_rows, st);
  k::vocab_xent_argmax_neg_id_cuda(d_logits.get(), d_mx.get(), vocab_begin, d_neg_best.get(), rows,
                                   cols, st);
  gpu.sync("vocab_xent " + shape);
  std::vector<float> g_local_max, g_sum, g_target, g_probs, g_dlogits, g_neg_best;
  std::vector<double> g_loss;
  d_local_max.download(g_local_max);
  d_sum.download(g_sum);
  d_target.download(g_target);
  d_probs.download(g_probs);
  d_dlogits.download(g_dlogits);
  d_neg_best.download(g_neg_best);
  d_loss.download(g_loss);
  gpu.sync("vocab_xent " + shape + " (download)");

  out.push_back(identical_check("vocab_xent_row_max " + shape, g_local_max, local_max));
  out.push_back(rel_check("vocab_xent_partials sum_exp " + shape, max_rel_err(g_sum, sum),
                          kSameOrderTol, kSameOrderNote));
  out.push_back(identical_check("vocab_xent_partials target_logit " + shape, g_target, target));
  out.push_back(rel_check("vocab_xent_probs probs " + shape, max_rel_err(g_probs, probs),
                          kSameOrderTol, kSameOrderNote));
  out.push_back(
      rel_check("vocab_xent_probs row_loss " + shape, max_rel_err(g_loss, loss), kRowLossTol,
                "doubles: only the device's exp and log differ from glibc's (last bits)"));
  out.push_back(identical_check("vocab_xent_backward " + shape, g_dlogits, dlogits));
  out.push_back(identical_check("vocab_xent_argmax_neg_id " + shape, g_neg_best, neg_best));
}

// The embedding of a table cut by rows: this rank holds rows [begin, end) of `vocab`; half the ids
// from a few values in the range (repeated ids), the rest anywhere (many outside it).
void range_embedding_case(Gpu& gpu, CheckList& out, int64_t vocab, int64_t begin, int64_t end,
                          int64_t dim) {
  const int64_t batch = 3, steps = 17, n = batch * steps, held = end - begin;
  const auto seed = static_cast<uint32_t>(vocab * 5 + begin * 3 + dim) + 700;
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(static_cast<std::size_t>(n));
  for (auto& id : ids)
    id = static_cast<int32_t>(
        rng() % 2 && held > 0 ? begin + rng() % static_cast<uint32_t>(std::min<int64_t>(held, 3))
                              : rng() % static_cast<uint32_t>(vocab));
  const auto table = randn(static_cast<std::size_t>(held * dim), seed + 1),
             dy = randn(static_cast<std::size_t>(n * dim), seed + 3),
             dtable0 = randn(static_cast<std::size_t>(held * dim), seed + 4),
             dpos0 = randn(static_cast<std::size_t>(steps * dim), seed + 5);
  const k::EmbeddingGradIndex index = k::range_embedding_grad_index(ids.data(), n, begin, end);

  for (const bool with_pos : {false, true}) {
    const std::string shape = fmt::format("vocab={} rows=[{},{}) dim={} n={} {}", vocab, begin, end,
                                          dim, n, with_pos ? "with positions" : "no positions");
    std::vector<float> y(static_cast<std::size_t>(n * dim)), dtable = dtable0, dpos = dpos0;
    k::range_embedding_forward(ids.data(), table.data(), begin, end, y.data(), n, dim);
    k::range_embedding_backward(ids.data(), dy.data(), begin, end, dtable.data(),
                                with_pos ? dpos.data() : nullptr, n, steps, dim);

    DeviceArray<int32_t> d_ids(gpu, ids), d_order(gpu, index.order),
        d_seg_start(gpu, index.seg_start), d_seg_id(gpu, index.seg_id);
    DeviceArray<float> d_table(gpu, table), d_dy(gpu, dy), d_dtable(gpu, dtable0),
        d_dpos(gpu, dpos0), d_y(gpu, static_cast<std::size_t>(n * dim));
    const cudaStream_t st = gpu.stream();
    k::range_embedding_forward_cuda(d_ids.get(), d_table.get(), begin, end, d_y.get(), n, dim, st);
    const k::EmbeddingGradIndexCuda d_index{d_order.get(), d_seg_start.get(), d_seg_id.get(),
                                            index.segments()};
    k::range_embedding_backward_cuda(d_index, d_dy.get(), d_dtable.get(),
                                     with_pos ? d_dpos.get() : nullptr, n, steps, dim, st);
    gpu.sync("range_embedding " + shape);
    std::vector<float> g_y, g_dtable, g_dpos;
    d_y.download(g_y);
    d_dtable.download(g_dtable);
    d_dpos.download(g_dpos);
    gpu.sync("range_embedding " + shape + " (download)");

    out.push_back(identical_check("range_embedding_forward " + shape, g_y, y));
    out.push_back(identical_check("range_embedding_backward dtable " + shape, g_dtable, dtable));
    out.push_back(identical_check("range_embedding_backward dpos " + shape, g_dpos, dpos));
  }
}

// batch 1: gemm_cuda; batch 3: gemm_strided_batched_cuda with strides that leave gaps. Every
// matrix has a leading dimension larger than its row length (the padding must stay untouched).
void gemm_case(Gpu& gpu, CheckList& out, bool ta, bool tb, int64_t m, int64_t n, int64_t kk,
               int64_t batch) {
  const k::Trans tra = ta ? k::Trans::Yes : k::Trans::No, trb = tb ? k::Trans::Yes : k::Trans::No;
  // Stored shapes (row-major): A is m x k, or k x m when transposed; B k x n, or n x k.
  const int64_t a_rows = ta ? kk : m, a_cols = ta ? m : kk;
  const int64_t b_rows = tb ? n : kk, b_cols = tb ? kk : n;
  const int64_t lda = a_cols + 3, ldb = b_cols + 2, ldc = n + 5;
  const int64_t stride_a = a_rows * lda + 7, stride_b = b_rows * ldb + 1, stride_c = m * ldc + 4;
  const auto seed = static_cast<uint32_t>(m * 1000 + n * 10 + kk + batch + ta * 2 + tb) + 400;
  const auto a = randn(static_cast<std::size_t>(stride_a * batch), seed),
             b = randn(static_cast<std::size_t>(stride_b * batch), seed + 1),
             c0 = randn(static_cast<std::size_t>(stride_c * batch), seed + 2);
  const float alpha = 0.7f, beta = 0.3f;
  const char* const op = batch == 1 ? "gemm" : "gemm_strided_batched";
  const std::string shape =
      fmt::format("{}{} m={} n={} k={} batch={}", ta ? "T" : "N", tb ? "T" : "N", m, n, kk, batch);

  std::vector<float> c = c0;
  for (int64_t i = 0; i < batch; ++i)
    k::gemm(tra, trb, m, n, kk, alpha, a.data() + i * stride_a, lda, b.data() + i * stride_b, ldb,
            beta, c.data() + i * stride_c, ldc);

  DeviceArray<float> d_a(gpu, a), d_b(gpu, b), d_c(gpu, c0);
  if (batch == 1)
    k::gemm_cuda(gpu.cublas(), tra, trb, m, n, kk, alpha, d_a.get(), lda, d_b.get(), ldb, beta,
                 d_c.get(), ldc);
  else
    k::gemm_strided_batched_cuda(gpu.cublas(), tra, trb, m, n, kk, alpha, d_a.get(), lda, stride_a,
                                 d_b.get(), ldb, stride_b, beta, d_c.get(), ldc, stride_c, batch);
  gpu.sync(fmt::format("{} {}", op, shape));
  std::vector<float> g_c;
  d_c.download(g_c);
  gpu.sync(fmt::format("{} {} (download)", op, shape));

  // The padding between rows and matrices is never written: equal to the input there.
  std::size_t touched = 0;
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = n; j < ldc && r * ldc + j < stride_c; ++j) {
        const auto at = static_cast<std::size_t>(i * stride_c + r * ldc + j);
        touched += std::bit_cast<uint32_t>(g_c[at]) != std::bit_cast<uint32_t>(c0[at]) ? 1 : 0;
      }
  out.push_back(bounded(kGroup, fmt::format("{} padding {}", op, shape), "elements changed",
                        static_cast<double>(touched), 0,
                        "the padding past each row's n columns (ldc > n) must stay untouched"));
  out.push_back(norm_check(fmt::format("{} {}", op, shape), g_c, c, kGemmTol, kGemmNote));
}

void attention_case(Gpu& gpu, CheckList& out, int64_t steps, int64_t heads, int64_t head_dim) {
  k::AttentionDims dims;
  dims.batch = 2;
  dims.steps = steps;
  dims.heads = heads;
  dims.head_dim = head_dim;
  const int64_t B = dims.batch, T = steps, C = dims.width();
  const std::string shape = fmt::format("B={} T={} heads={} d={}", B, T, heads, head_dim);
  const auto seed = static_cast<uint32_t>(T * 100 + heads * 10 + head_dim) + 500;
  const auto n_qkv = static_cast<std::size_t>(B * T * 3 * C),
             n_att = static_cast<std::size_t>(B * T * C),
             n_probs = static_cast<std::size_t>(B * heads * T * T);
  const auto qkv = randn(n_qkv, seed, 0.0f, 1.5f), datt = randn(n_att, seed + 1);

  std::vector<float> probs(n_probs), att(n_att), dqkv(n_qkv),
      dscores(static_cast<std::size_t>(T * T));
  k::causal_attention_forward(dims, qkv.data(), probs.data(), att.data());
  k::causal_attention_backward(dims, qkv.data(), probs.data(), datt.data(), dqkv.data(),
                               dscores.data());

  DeviceArray<float> d_qkv(gpu, qkv), d_datt(gpu, datt), d_cpu_probs(gpu, probs),
      d_probs(gpu, n_probs), d_att(gpu, n_att), d_dqkv(gpu, n_qkv),
      d_dscores(gpu, static_cast<std::size_t>(heads * T * T));
  k::causal_attention_forward_cuda(dims, d_qkv.get(), d_probs.get(), d_att.get(), gpu.cublas());
  // The backward from the CPU's probabilities: only the GEMMs' order differs.
  k::causal_attention_backward_cuda(dims, d_qkv.get(), d_cpu_probs.get(), d_datt.get(),
                                    d_dqkv.get(), d_dscores.get(), gpu.cublas());
  gpu.sync("attention " + shape);
  std::vector<float> g_probs, g_att, g_dqkv;
  d_probs.download(g_probs);
  d_att.download(g_att);
  d_dqkv.download(g_dqkv);
  gpu.sync("attention " + shape + " (download)");

  // Exact zeros above the diagonal.
  std::size_t nonzero = 0;
  for (int64_t bh = 0; bh < B * heads; ++bh)
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = i + 1; j < T; ++j)
        nonzero +=
            std::bit_cast<uint32_t>(g_probs[static_cast<std::size_t>((bh * T + i) * T + j)]) != 0u
                ? 1
                : 0;
  out.push_back(bounded(kGroup, "attention_forward causal_zeros " + shape, "elements not +0",
                        static_cast<double>(nonzero), 0,
                        "the probabilities above the diagonal must be exactly +0"));
  out.push_back(norm_check("attention_forward probs " + shape, g_probs, probs, kCancellingTol,
                           kCancellingNote));
  out.push_back(norm_check("attention_forward att " + shape, g_att, att, kGemmTol, kGemmNote));
  out.push_back(norm_check("attention_backward dqkv " + shape, g_dqkv, dqkv, kGemmTol, kGemmNote));
}

void layer_checks(Gpu& gpu, Runner& runner) {
  for (const int64_t rows : kRows)
    for (const int64_t cols : kCols)
      runner.run(fmt::format("elementwise {}x{}", rows, cols),
                 [&](CheckList& out) { elementwise_case(gpu, out, rows, cols); });
  for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{(1 << 20) + 3}})
    runner.run(fmt::format("activations n={}", n),
               [&](CheckList& out) { activations_case(gpu, out, n); });
  for (const int64_t rows : kRows)
    for (const int64_t dim : kCols)
      runner.run(fmt::format("layer_norm {}x{}", rows, dim),
                 [&](CheckList& out) { layer_norm_case(gpu, out, rows, dim); });
  for (const int64_t rows : kRows)
    for (const int64_t classes : {int64_t{1}, int64_t{33}, int64_t{768}, int64_t{1000}})
      runner.run(fmt::format("softmax_xent {}x{}", rows, classes),
                 [&](CheckList& out) { softmax_xent_case(gpu, out, rows, classes); });
  for (const int64_t vocab : {int64_t{1}, int64_t{65}, int64_t{1000}})
    for (const int64_t dim : {int64_t{1}, int64_t{33}, int64_t{768}})
      runner.run(fmt::format("embedding vocab={} dim={}", vocab, dim),
                 [&](CheckList& out) { embedding_case(gpu, out, vocab, dim); });
  for (const int64_t rows : kRows)
    for (const int64_t cols : {int64_t{0}, int64_t{1}, int64_t{33}, int64_t{1000}})
      runner.run(fmt::format("vocab_xent {}x{}", rows, cols),
                 [&](CheckList& out) { vocab_xent_case(gpu, out, rows, cols); });
  struct Rows {
    int64_t vocab, begin, end;
  };
  for (const Rows v :
       {Rows{1000, 0, 1000}, Rows{1000, 250, 500}, Rows{65, 30, 31}, Rows{65, 65, 65}})
    for (const int64_t dim : {int64_t{1}, int64_t{33}, int64_t{768}})
      runner.run(
          fmt::format("range_embedding vocab={} rows=[{},{}) dim={}", v.vocab, v.begin, v.end, dim),
          [&](CheckList& out) { range_embedding_case(gpu, out, v.vocab, v.begin, v.end, dim); });
  struct Mnk {
    int64_t m, n, k;
  };
  for (const bool ta : {false, true})
    for (const bool tb : {false, true})
      for (const Mnk s : {Mnk{1, 1, 1}, Mnk{7, 33, 5}, Mnk{65, 17, 129}, Mnk{300, 257, 64}})
        for (const int64_t batch : {int64_t{1}, int64_t{3}})
          runner.run(fmt::format("{} {}{} m={} n={} k={} batch={}",
                                 batch == 1 ? "gemm" : "gemm_strided_batched", ta ? "T" : "N",
                                 tb ? "T" : "N", s.m, s.n, s.k, batch),
                     [&](CheckList& out) { gemm_case(gpu, out, ta, tb, s.m, s.n, s.k, batch); });
  for (const int64_t steps : {int64_t{1}, int64_t{17}, int64_t{64}})
    for (const int64_t heads : {int64_t{1}, int64_t{4}})
      for (const int64_t head_dim : {int64_t{8}, int64_t{16}})
        runner.run(fmt::format("attention B=2 T={} heads={} d={}", steps, heads, head_dim),
                   [&](CheckList& out) { attention_case(gpu, out, steps, heads, head_dim); });
}

}  // namespace

CheckList kernel_checks(int device) {
  if (const std::string why = gpu_skip_reason(device); !why.empty())
    return {skipped(kGroup, "CUDA kernels", why)};

  CheckList out;
  std::unique_ptr<Gpu> gpu;
  try {
    gpu = std::make_unique<Gpu>(device);
  } catch (const std::exception& e) {
    out.push_back(failed(kGroup, fmt::format("CUDA context on device {}", device), e.what()));
    return out;
  }
  Runner runner(*gpu, out);
  update_checks(*gpu, runner);
  scale_cast_and_sq_norm_checks(*gpu, runner);
  layer_checks(*gpu, runner);
  runner.finish();
  return out;
}

#else  // !SHARDLAB_HAVE_DEVICE_TRAINING

CheckList kernel_checks(int /*device*/) {
  return {skipped(kGroup, "CUDA kernels",
                  "this shardlab was built without the CUDA kernels (nvcc was not found when it "
                  "was built)")};
}

#endif  // SHARDLAB_HAVE_DEVICE_TRAINING

}  // namespace shardlab::doctor
