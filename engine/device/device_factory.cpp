// The devices a rank can make: make_device() and the process's host device.
#include "engine/core/error.h"
#include "engine/device/cpu_device.h"
#include "engine/device/device.h"
#include "engine/device/test_device.h"

#if SHARDLAB_HAVE_CUDA_KERNELS
#include "engine/device/cuda_device.h"
#endif

namespace shardlab {

std::unique_ptr<Device> make_device(DeviceKind kind, const DeviceOptions& options) {
  switch (kind) {
    case DeviceKind::cpu:
      return std::make_unique<CpuDevice>();
    case DeviceKind::test:
      return std::make_unique<TestDevice>(options);
    case DeviceKind::cuda:
#if SHARDLAB_HAVE_CUDA_KERNELS
      return std::make_unique<CudaDevice>(options);
#else
      SL_THROW(DeviceError, "device cuda: this shardlab was built without the CUDA kernels");
#endif
  }
  SL_THROW(InternalError, "make_device: unknown kind {}", static_cast<int>(kind));
}

Device& host_device() {
  static CpuDevice device;
  return device;
}

}  // namespace shardlab
