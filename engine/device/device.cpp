#include "engine/device/device.h"

#include <fmt/format.h>

#include "engine/core/error.h"

#if SHARDLAB_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace shardlab {

int usable_gpus(std::string* why) {
#if SHARDLAB_HAVE_CUDA
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    if (why) *why = fmt::format("{} ({})", cudaGetErrorString(err), cudaGetErrorName(err));
    return 0;
  }
  if (count == 0 && why) *why = "no CUDA device is visible to this process";
  return count;
#else
  if (why) *why = "this shardlab was built without a CUDA toolkit";
  return 0;
#endif
}

std::string device_problem(const std::string& device) {
  if (device == "cpu") return {};
  if (device != "cuda") return fmt::format("unknown device '{}' (known: cpu, cuda)", device);
  std::string why;
  if (usable_gpus(&why) == 0)
    return fmt::format("cuda needs a usable GPU, but {}; run it with --set device=cpu", why);
#if SHARDLAB_HAVE_CUDA_KERNELS
  return {};
#else
  return "this shardlab was built without the CUDA kernels (nvcc was not found when it was built); "
         "run it with --set device=cpu, or rebuild where the CUDA toolkit's nvcc is found";
#endif
}

std::string describe_gpu(int index) {
#if SHARDLAB_HAVE_CUDA
  cudaDeviceProp prop{};
  const cudaError_t err = cudaGetDeviceProperties(&prop, index);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return fmt::format("no such device: {} ({})", cudaGetErrorString(err), cudaGetErrorName(err));
  }
  const double gib = static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0);
  return fmt::format("{} (sm_{}{}, {:.1f} GiB)", prop.name, prop.major, prop.minor, gib);
#else
  (void)index;
  return "this shardlab was built without a CUDA toolkit";
#endif
}

void require_device(const std::string& device) {
  const std::string problem = device_problem(device);
  SL_ENFORCE(problem.empty(), "device: {}", problem);
}

}  // namespace shardlab
