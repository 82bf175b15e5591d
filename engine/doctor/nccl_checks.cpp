#include "engine/doctor/nccl_checks.h"

#include <fmt/format.h>

#include <mutex>
#include <string>
#include <vector>

#include "engine/core/device.h"

#if SHARDLAB_HAVE_DEVICE_TRAINING && defined(SHARDLAB_HAVE_NCCL) && SHARDLAB_HAVE_NCCL
#define SHARDLAB_DOCTOR_NCCL 1
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <functional>

#include "engine/comm/nccl/world.h"
#include "engine/comm/threads/world.h"
#include "engine/core/error.h"
#else
#define SHARDLAB_DOCTOR_NCCL 0
#endif

namespace shardlab::doctor {

#if SHARDLAB_DOCTOR_NCCL
namespace {

constexpr const char* kGroup = "nccl";

void cuda_ok(cudaError_t err, const char* what) {
  SL_ENFORCE_T(DeviceError, err == cudaSuccess, "{}: {}", what, cudaGetErrorString(err));
}

// A float array on the current device, freed on every path.
class DeviceFloats {
 public:
  explicit DeviceFloats(const std::vector<float>& host) : n_(host.size()) {
    cuda_ok(cudaMalloc(reinterpret_cast<void**>(&p_), std::max<size_t>(n_, 1) * sizeof(float)),
            "cudaMalloc");
    if (n_ > 0)
      cuda_ok(cudaMemcpy(p_, host.data(), n_ * sizeof(float), cudaMemcpyHostToDevice), "upload");
  }
  ~DeviceFloats() { (void)cudaFree(p_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  std::span<float> span() { return {p_, n_}; }
  std::vector<float> read() const {
    std::vector<float> out(n_);
    if (n_ > 0)
      cuda_ok(cudaMemcpy(out.data(), p_, n_ * sizeof(float), cudaMemcpyDeviceToHost), "download");
    return out;
  }

 private:
  float* p_ = nullptr;
  size_t n_;
};

// Rank r's element i: a small integer (exact sums in float32).
float value(int rank, int64_t i) {
  return static_cast<float>((rank + 1) * 3 + i % 11);
}
std::vector<float> values(int rank, int64_t n, int64_t offset = 0) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = value(rank, offset + i);
  return v;
}

double differing(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return static_cast<double>(std::max(got.size(), want.size()));
  double d = 0;
  for (size_t i = 0; i < got.size(); ++i) d += got[i] == want[i] ? 0 : 1;
  return d;
}

// One rank's checks of every op at `count` elements; returns elements differing per op.
void check_ops(Communicator& world, int64_t count, std::vector<std::pair<std::string, double>>& r) {
  const int n = world.size(), me = world.rank();
  {
    DeviceFloats buf(values(me, count));
    world.all_reduce(buf.span(), ReduceOp::Sum);
    std::vector<float> want(static_cast<size_t>(count), 0.0f);
    for (int q = 0; q < n; ++q)
      for (int64_t i = 0; i < count; ++i) want[static_cast<size_t>(i)] += value(q, i);
    r.emplace_back("all_reduce sum", differing(buf.read(), want));
  }
  {
    DeviceFloats buf(values(me, count));
    world.all_reduce(buf.span(), ReduceOp::Max);
    r.emplace_back("all_reduce max", differing(buf.read(), values(n - 1, count)));
  }
  {
    DeviceFloats in(values(me, count * n));
    DeviceFloats out(std::vector<float>(static_cast<size_t>(count), -1.0f));
    world.reduce_scatter(in.span(), out.span(), ReduceOp::Sum);
    std::vector<float> want(static_cast<size_t>(count), 0.0f);
    for (int q = 0; q < n; ++q)
      for (int64_t i = 0; i < count; ++i)
        want[static_cast<size_t>(i)] += value(q, static_cast<int64_t>(me) * count + i);
    r.emplace_back("reduce_scatter sum", differing(out.read(), want));
  }
  {
    DeviceFloats in(values(me, count));
    DeviceFloats out(std::vector<float>(static_cast<size_t>(count * n), -1.0f));
    world.all_gather(in.span(), out.span());
    std::vector<float> want;
    for (int q = 0; q < n; ++q) {
      const std::vector<float> part = values(q, count);
      want.insert(want.end(), part.begin(), part.end());
    }
    r.emplace_back("all_gather", differing(out.read(), want));
  }
  {
    const int root = n - 1;
    DeviceFloats buf(me == root ? values(root, count) : std::vector<float>(count, -1.0f));
    world.broadcast(buf.span(), root);
    r.emplace_back("broadcast", differing(buf.read(), values(root, count)));
  }
}

void check_world(CheckList& out, int ranks) {
  const std::vector<int64_t> counts = {1, 4099, (int64_t{1} << 20) + 3};
  std::mutex m;
  // op name x count -> elements differing, summed over the ranks
  std::vector<std::pair<std::string, double>> total;
  CommOptions options;
  options.timeout = std::chrono::seconds(60);
  run_threads(ranks, options, [&](Communicator& boot) {
    cuda_ok(cudaSetDevice(boot.rank()), "cudaSetDevice");
    auto world = make_nccl_world(boot, boot.rank(), options);
    std::vector<std::pair<std::string, double>> mine;
    for (const int64_t c : counts) {
      std::vector<std::pair<std::string, double>> r;
      check_ops(*world, c, r);
      for (auto& [op, d] : r) mine.emplace_back(fmt::format("{} n={}", op, c), d);
    }
    const std::lock_guard lock(m);
    if (total.empty()) total.resize(mine.size());
    for (size_t i = 0; i < mine.size(); ++i) {
      total[i].first = mine[i].first;
      total[i].second += mine[i].second;
    }
  });
  for (const auto& [name, d] : total)
    out.push_back(bounded(kGroup, fmt::format("{} on {} GPU{}", name, ranks, ranks > 1 ? "s" : ""),
                          "elements differing", d, 0,
                          "small-integer contributions: every sum is exact in float32"));
}

}  // namespace

CheckList nccl_checks() {
  CheckList out;
  std::string why;
  const int gpus = usable_cuda_devices(&why);
  if (gpus == 0) {
    out.push_back(skipped(kGroup, "NCCL collectives", "no usable GPU: " + why));
    return out;
  }
  guarded(out, kGroup, "NCCL on 1 GPU", [&](CheckList& o) { check_world(o, 1); });
  if (gpus < 2)
    out.push_back(skipped(kGroup, "NCCL on every GPU",
                          fmt::format("needs two GPUs, this node has {}", gpus)));
  else
    guarded(out, kGroup, fmt::format("NCCL on {} GPUs", gpus),
            [&](CheckList& o) { check_world(o, gpus); });
  return out;
}

#else

CheckList nccl_checks() {
  if (const std::string why = gpu_skip_reason(0); !why.empty())
    return {skipped("nccl", "NCCL collectives", why)};
  return {skipped("nccl", "NCCL collectives", "this shardlab was built without NCCL")};
}

#endif

}  // namespace shardlab::doctor
