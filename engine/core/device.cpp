#include "engine/core/device.h"

#include <fmt/format.h>

#include "engine/core/cuda_check.h"
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
    if (why) *why = cuda_error_text(err);
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
  if (device == "cpu" || device == "test") return {};
  if (device != "cuda") return fmt::format("unknown device '{}' (known: cpu, cuda, test)", device);
  std::string why;
  if (usable_gpus(&why) == 0) return fmt::format("cuda needs a usable GPU, but {}", why);
#if SHARDLAB_HAVE_CUDA_KERNELS
  return gpu_problem(0);
#else
  return "this shardlab was built without the CUDA kernels (nvcc was not found when it was "
         "built); rebuild where the CUDA toolkit's nvcc is found";
#endif
}

std::string gpu_problem(int index) {
#if SHARDLAB_HAVE_CUDA
  cudaDeviceProp prop{};
  const cudaError_t err = cudaGetDeviceProperties(&prop, index);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return fmt::format("GPU {} cannot be used: {}", index, cuda_error_text(err));
  }
  const int arch = prop.major * 10 + prop.minor;
  // The lowest architecture the kernels were built for (0: unknown, e.g. "native": no check).
  // Newer GPUs run the compute_XX PTX through the driver's JIT; older ones cannot run them.
  constexpr int kMinArch = SHARDLAB_CUDA_MIN_ARCH;
  if (kMinArch > 0 && arch < kMinArch)
    return fmt::format(
        "GPU {} ({}) is sm_{}, and this build's CUDA kernels need sm_{} or newer (rebuild with "
        "-DCMAKE_CUDA_ARCHITECTURES={})",
        index, prop.name, arch, kMinArch, arch);
  return {};
#else
  return fmt::format("GPU {} cannot be used: this shardlab was built without a CUDA toolkit",
                     index);
#endif
}

std::string describe_gpu(int index) {
#if SHARDLAB_HAVE_CUDA
  cudaDeviceProp prop{};
  const cudaError_t err = cudaGetDeviceProperties(&prop, index);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return fmt::format("no such device: {}", cuda_error_text(err));
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
  SL_ENFORCE(problem.empty(), "device: {}; run it with --set device=cpu", problem);
}

int gpu_for_local_rank(int local_rank) {
  std::string why;
  const int gpus = usable_gpus(&why);
  return gpus > 0 ? local_rank % gpus : 0;
}

}  // namespace shardlab
