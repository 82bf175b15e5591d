// GpuOptimizer: engine/optim's optimizers (their registry.h entries) mapped onto the kernels/cuda
// launchers: the same config-to-Args mapping, the same step counting (Optimizer::step), state
// arrays of the same names in DeviceBuffers.
#include "engine/device/gpu_optimizer.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"
#include "engine/device/cuda_update.h"
#include "engine/device/pinned_buffer.h"
#include "engine/optim/optimizer.h"
#include "engine/optim/registry.h"
#include "engine/optim/update_args.h"

namespace shardlab {

namespace {

// Fills n device floats with `value` on the device: one element copied up, then doubled by
// device-to-device copies (log2(n) of them), so no host array of n floats is needed.
void fill_device(float* data, int64_t n, float value, CudaContext& ctx) {
  if (n == 0) return;
  // From page-locked memory, so the copy is asynchronous and the one wait is the bounded sync.
  PinnedBuffer<float> one(1);
  one.data()[0] = value;
  SL_CUDA_CHECK(
      cudaMemcpyAsync(data, one.data(), sizeof(float), cudaMemcpyHostToDevice, ctx.stream()),
      "cudaMemcpyAsync (optimizer state fill)");
  for (int64_t have = 1; have < n;) {
    const int64_t take = std::min(have, n - have);
    SL_CUDA_CHECK(cudaMemcpyAsync(data + have, data, static_cast<size_t>(take) * sizeof(float),
                                  cudaMemcpyDeviceToDevice, ctx.stream()),
                  "cudaMemcpyAsync (optimizer state fill)");
    have += take;
  }
  // `one` is freed on return: the first copy must have read it.
  ctx.sync("filling the optimizer state");
}

}  // namespace

GpuOptimizer::GpuOptimizer(const OptimizerConfig& config, int64_t n, CudaContext& ctx)
    : config_(config), n_(n), ctx_(ctx) {
  // make_optimizer validates (validate_optimizer_config) with the messages a CPU job gets.
  (void)make_optimizer(config_);
  SL_ENFORCE(n >= 0, "GpuOptimizer: negative size {}", n);
  ctx_.make_current();
  const std::vector<StateArray> arrays = state_arrays(config_);
  for (const StateArray& a : arrays)
    state_.emplace_back(a.name, CudaBuffer<float>(MemCategory::optimizer_state,
                                                    static_cast<size_t>(n * a.per_param)));
  ctx_.order_after_default_stream();
  for (size_t i = 0; i < arrays.size(); ++i)
    if (arrays[i].initial != 0.0)
      fill_device(state_[i].second.data(), n * arrays[i].per_param,
                  static_cast<float>(arrays[i].initial), ctx_);
}

void GpuOptimizer::step(float* params, const float* grads, double lr) {
  SL_ENFORCE(std::isfinite(lr) && lr >= 0.0, "optimizer.step: lr must be finite and >= 0, got {}",
             lr);
  SL_ENFORCE(n_ == 0 || (params != nullptr && grads != nullptr),
             "optimizer.step: null device pointer for {} elements", n_);
  ++steps_;
  // The registry's state order, null where an array is not kept (as the CPU optimizer passes).
  std::vector<float*> pointers;
  for (const StateArraySpec& s : optimizer_spec(config_).state) {
    float* p = nullptr;
    for (auto& [k, b] : state_)
      if (k == s.name) p = b.data();
    pointers.push_back(p);
  }
  const cudaStream_t stream = ctx_.stream();
  run_cuda_update(
      update_args(
          config_,
          {.param = params, .grad = grads, .n = n_, .lr = lr, .step = steps_, .state = pointers}),
      stream);
}

std::vector<std::pair<std::string, std::vector<float>>> GpuOptimizer::download_state() const {
  ctx_.make_current();
  // Through page-locked staging: a copy into pageable memory would wait unbounded.
  std::vector<std::pair<std::string, std::vector<float>>> out;
  PinnedBuffer<float> stage;
  for (const auto& [name, b] : state_) {
    std::vector<float> host(b.size());
    if (!host.empty()) {
      SL_CUDA_CHECK(cudaMemcpyAsync(stage.reserve(b.size()), b.data(), b.bytes(),
                                    cudaMemcpyDeviceToHost, ctx_.stream()),
                    "cudaMemcpyAsync (optimizer state download)");
      ctx_.sync("downloading the optimizer state");
      std::copy_n(stage.data(), b.size(), host.data());
    }
    out.emplace_back(name, std::move(host));
  }
  return out;
}

int64_t GpuOptimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& [name, b] : state_) bytes += static_cast<int64_t>(b.bytes());
  return bytes;
}

}  // namespace shardlab
