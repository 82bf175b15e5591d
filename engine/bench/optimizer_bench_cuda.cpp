#include "engine/bench/optimizer_bench_cuda.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <ostream>

#include "engine/bench/harness.h"
#include "engine/bench/optimizer_bench.h"
#include "engine/core/cuda_check.h"
#include "engine/core/error.h"
#include "engine/device/cuda_update.h"
#include "engine/optim/registry.h"

namespace shardlab {

namespace {

// A device allocation freed on scope exit.
class CudaBuffer {
 public:
  CudaBuffer(size_t bytes, const char* what) {
    SL_CUDA_CHECK(cudaMalloc(&ptr_, bytes),
                  fmt::format("cudaMalloc of {} MiB for {}", bytes >> 20, what).c_str());
  }
  ~CudaBuffer() {
    if (ptr_) (void)cudaFree(ptr_);
  }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  float* f() const { return static_cast<float*>(ptr_); }
  uint16_t* u16() const { return static_cast<uint16_t*>(ptr_); }

 private:
  void* ptr_ = nullptr;
};

class Stream {
 public:
  Stream() {
    SL_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~Stream() { (void)cudaStreamDestroy(s_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class EventPair {
 public:
  EventPair() {
    SL_CUDA_CHECK(cudaEventCreate(&start_), "cudaEventCreate");
    SL_CUDA_CHECK(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~EventPair() {
    (void)cudaEventDestroy(start_);
    (void)cudaEventDestroy(stop_);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;

  // Seconds `work` takes on `stream`, between two events recorded around it.
  double time(cudaStream_t stream, const std::function<void()>& work) {
    SL_CUDA_CHECK(cudaEventRecord(start_, stream), "cudaEventRecord");
    work();
    SL_CUDA_CHECK(cudaEventRecord(stop_, stream), "cudaEventRecord");
    SL_CUDA_CHECK(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    SL_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return static_cast<double>(ms) * 1e-3;  // sample_seconds applies the floor
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// Runs a kernel launcher, turning its std::runtime_error (a failed launch) into an Error.
void launch(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    SL_THROW(Error, "bench optimizer --device cuda: {}", e.what());
  }
}

// One benchmarked configuration: the CPU bench's (optimizer_bench.h), plus Adam's bf16 master.
struct Case {
  OptimizerConfig config;
  std::string setting;
  int state_arrays = 0;  // fp32 state arrays, each read and written
  bool bf16 = false;     // also writes a bf16 copy of the parameters
};

std::vector<Case> cases_for(const std::vector<std::string>& names) {
  std::vector<Case> cases;
  for (const auto& name : names) {
    Case c;
    c.config = optimizer_bench_config(name, c.setting);
    c.state_arrays = static_cast<int>(state_arrays(c.config).size());
    cases.push_back(c);
    if (name == "adam") {
      c.setting = "bf16 master";
      c.bf16 = true;
      cases.push_back(c);
    }
  }
  return cases;
}

}  // namespace

std::vector<OptimizerBenchCudaRow> run_optimizer_bench_cuda(
    const OptimizerBenchCudaOptions& options, std::ostream& out) {
  SL_ENFORCE(options.n >= 1, "bench.n: must be >= 1, got {}", options.n);
  SL_ENFORCE(options.reps >= 1, "bench.reps: must be >= 1, got {}", options.reps);
  SL_ENFORCE(options.warmup >= 0, "bench.warmup: must be >= 0, got {}", options.warmup);
  const std::vector<std::string> names =
      options.optimizers.empty() ? optimizer_names() : options.optimizers;
  const auto& known = optimizer_names();
  for (const auto& name : names)
    SL_ENFORCE(std::find(known.begin(), known.end(), name) != known.end(),
               "bench.optimizers: unknown optimizer '{}'", name);
  const std::vector<Case> cases = cases_for(names);

  SL_CUDA_CHECK(cudaSetDevice(0), "cudaSetDevice(0)");
  cudaDeviceProp prop{};
  SL_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");

  const int64_t n = options.n;
  const size_t fbytes = static_cast<size_t>(n) * sizeof(float);
  CudaBuffer param(fbytes, "params"), grad(fbytes, "grads"), state0(fbytes, "state"),
      state1(fbytes, "state"), bf16(static_cast<size_t>(n) * sizeof(uint16_t), "bf16 params");
  Stream stream;
  EventPair events;

  // Host-side initial values, copied in before each row so every optimizer starts from the same
  // values. Gradients are small and varied, never zero, so no kernel sees a degenerate input.
  std::vector<float> h_param(static_cast<size_t>(n)), h_grad(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    h_param[static_cast<size_t>(j)] = 0.5f + 1e-3f * static_cast<float>(j % 1000);
    h_grad[static_cast<size_t>(j)] = 1e-2f * static_cast<float>(j % 97 + 1) - 0.49f;
  }
  SL_CUDA_CHECK(cudaMemcpy(grad.f(), h_grad.data(), fbytes, cudaMemcpyHostToDevice),
                "cudaMemcpy H2D");

  // The yardstick: a D2D copy of n floats (grads -> a state array, which each row resets anyway).
  // Bytes: 2 x 4 x n, the read of the source and the write of the destination.
  const auto copy = [&] {
    SL_CUDA_CHECK(
        cudaMemcpyAsync(state0.f(), grad.f(), fbytes, cudaMemcpyDeviceToDevice, stream.get()),
        "cudaMemcpyAsync D2D");
  };
  const std::vector<double> copy_times = bench::sample_seconds(
      std::max(options.warmup, 1), options.reps, [&] { return events.time(stream.get(), copy); });
  const double copy_best = bench::best(copy_times);
  const double copy_gb_per_s = 2.0 * static_cast<double>(fbytes) / copy_best / 1e9;

  std::vector<OptimizerBenchCudaRow> rows;
  for (const Case& c : cases) {
    SL_CUDA_CHECK(cudaMemcpy(param.f(), h_param.data(), fbytes, cudaMemcpyHostToDevice),
                  "cudaMemcpy H2D");
    SL_CUDA_CHECK(cudaMemset(state0.f(), 0, fbytes), "cudaMemset");
    SL_CUDA_CHECK(cudaMemset(state1.f(), 0, fbytes), "cudaMemset");
    SL_CUDA_CHECK(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

    int64_t step = 0;
    float* const state[] = {state0.f(), state1.f()};
    const auto update = [&] {
      UpdateArgs args = update_args(c.config, {.param = param.f(),
                                               .grad = grad.f(),
                                               .n = n,
                                               .lr = c.config.lr,
                                               .step = ++step,
                                               .state = state});
      if (c.bf16) std::get<kernels::AdamArgs>(args).param_bf16 = bf16.u16();
      launch([&] { run_cuda_update(args, stream.get()); });
    };

    // Warm-up updates are timed too and discarded: each waits for its own events, so the
    // timed ones start on an idle stream.
    const std::vector<double> times = bench::sample_seconds(
        options.warmup, options.reps, [&] { return events.time(stream.get(), update); });

    OptimizerBenchCudaRow row;
    row.optimizer = c.config.name;
    row.setting = c.setting;
    row.n = n;
    // p r+w, g r, each state array r+w (4 B each), + the bf16 parameter copy's write (2 B).
    row.bytes_per_param = static_cast<int>((2 + 1 + 2 * c.state_arrays) * sizeof(float) +
                                           (c.bf16 ? sizeof(uint16_t) : 0));
    row.best_seconds = bench::best(times);
    row.median_seconds = bench::median(times);
    row.params_per_s = static_cast<double>(n) / row.best_seconds;
    row.gb_per_s = row.bytes_per_param * static_cast<double>(n) / row.best_seconds / 1e9;
    row.copy_gb_per_s = copy_gb_per_s;
    row.copy_ratio = row.gb_per_s / copy_gb_per_s;
    rows.push_back(row);
  }

  out << fmt::format(
      "optimizer update on {} (cuda:0), n = {} parameters, {} warm-up + {} timed updates (best, "
      "cudaEvent)\n",
      prop.name, n, options.warmup, options.reps);
  out << "bytes per update = B/param x n: param r+w, grad r, each state array r+w (4 B each), "
         "+ 2 B bf16 param write; copy = D2D cudaMemcpyAsync, read + write (8 B)\n";
  out << fmt::format("{:<9} {:<18} {:>7} {:>9} {:>9} {:>10} {:>7} {:>7}\n", "optimizer", "setting",
                     "B/param", "best ms", "median ms", "Mparams/s", "GB/s", "copy");
  out << fmt::format("{:<9} {:<18} {:>7} {:>9.3f} {:>9.3f} {:>10} {:>7.1f} {:>6.0f}%\n", "(copy)",
                     "D2D cudaMemcpy", 8, copy_best * 1e3, bench::median(copy_times) * 1e3, "-",
                     copy_gb_per_s, 100.0);
  for (const auto& r : rows)
    out << fmt::format("{:<9} {:<18} {:>7} {:>9.3f} {:>9.3f} {:>10.1f} {:>7.1f} {:>6.0f}%\n",
                       r.optimizer, r.setting, r.bytes_per_param, r.best_seconds * 1e3,
                       r.median_seconds * 1e3, r.params_per_s / 1e6, r.gb_per_s,
                       100.0 * r.copy_ratio);
  for (const auto& r : rows)
    if (r.optimizer == "adam" && r.setting == "defaults")
      out << fmt::format("adam (fp32) reaches {:.0f}% of the copy bandwidth (goal: >= 85%): {}\n",
                         100.0 * r.copy_ratio, r.copy_ratio >= 0.85 ? "met" : "not met");
  return rows;
}

}  // namespace shardlab
