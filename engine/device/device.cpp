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
  return "cuda: training on device buffers is not in this version yet (the CUDA kernels are "
         "built; the device execution path comes next); run it with --set device=cpu";
}

void require_device(const std::string& device) {
  const std::string problem = device_problem(device);
  SL_ENFORCE(problem.empty(), "device: {}", problem);
}

}  // namespace shardlab
