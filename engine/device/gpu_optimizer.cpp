// GpuOptimizer: engine/optim's optimizers (sgd.cpp, adam.cpp, rmsprop.cpp, adagrad.cpp) mapped onto
// the kernels/cuda launchers: the same config-to-Args mapping, the same step counting
// (Optimizer::step), state arrays of the same names in DeviceBuffers.
#include "engine/device/gpu_optimizer.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"
#include "engine/device/pinned_buffer.h"
#include "engine/optim/optimizer.h"
#include "engine/optim/update_args.h"
#include "kernels/cuda/adagrad_update.h"
#include "kernels/cuda/adam_update.h"
#include "kernels/cuda/rmsprop_update.h"
#include "kernels/cuda/sgd_update.h"

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
  const auto un = static_cast<size_t>(n);
  auto add = [&](const char* name) {
    state_.emplace_back(name, DeviceBuffer<float>(MemCategory::optimizer_state, un));
  };
  const std::string& o = config_.name;
  if (o == "sgd") {
    if (config_.momentum != 0.0) add("momentum_buffer");
  } else if (o == "adam" || o == "adamw") {
    add("exp_avg");
    add("exp_avg_sq");
  } else if (o == "rmsprop") {
    add("square_avg");
    if (config_.momentum != 0.0) add("momentum_buffer");
  } else if (o == "adagrad") {
    add("sum");
  } else {
    SL_THROW(InternalError, "GpuOptimizer: '{}' passed validation but has no implementation", o);
  }
  ctx_.order_after_default_stream();
  if (o == "adagrad" && config_.initial_accumulator != 0.0)
    fill_device(state_.back().second.data(), n, static_cast<float>(config_.initial_accumulator),
                ctx_);
}

void GpuOptimizer::step(float* params, const float* grads, double lr) {
  SL_ENFORCE(std::isfinite(lr) && lr >= 0.0, "optimizer.step: lr must be finite and >= 0, got {}",
             lr);
  SL_ENFORCE(n_ == 0 || (params != nullptr && grads != nullptr),
             "optimizer.step: null device pointer for {} elements", n_);
  ++steps_;
  auto buf = [&](const char* name) -> float* {
    for (auto& [k, b] : state_)
      if (k == name) return b.data();
    return nullptr;
  };
  const std::string& o = config_.name;
  const cudaStream_t stream = ctx_.stream();
  const OptimizerConfig& c = config_;
  if (o == "sgd") {
    const auto a = sgd_args(c, params, grads, n_, lr, buf("momentum_buffer"));
    device_call("sgd_update", [&] { kernels::sgd_update_cuda(a, stream); });
  } else if (o == "adam" || o == "adamw") {
    const auto a = adam_args(c, params, grads, n_, lr, steps_, buf("exp_avg"), buf("exp_avg_sq"));
    device_call("adam_update", [&] { kernels::adam_update_cuda(a, stream); });
  } else if (o == "rmsprop") {
    const auto a =
        rmsprop_args(c, params, grads, n_, lr, buf("square_avg"), buf("momentum_buffer"));
    device_call("rmsprop_update", [&] { kernels::rmsprop_update_cuda(a, stream); });
  } else {
    const auto a = adagrad_args(c, params, grads, n_, lr, buf("sum"));
    device_call("adagrad_update", [&] { kernels::adagrad_update_cuda(a, stream); });
  }
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
