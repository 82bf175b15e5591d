// CpuDevice: the host as a Device. Memory is host memory (aligned to 256 bytes, zero-filled);
// every kernel of the table is kernels/cpu's, run on the calling thread when it is queued, so
// there is nothing to wait for. Its copies are memcpy, counted like any device's.
#pragma once

#include <utility>

#include "engine/device/host_kernels.h"

namespace shardlab {

class CpuDevice final : public HostKernelDevice<CpuDevice> {
 public:
  CpuDevice() = default;
  ~CpuDevice() override { release_staging(); }
  DeviceKind kind() const override { return DeviceKind::cpu; }
  std::string describe() const override { return "cpu"; }
  void* allocate(size_t bytes, const char* what) override;
  void deallocate(void* p, size_t bytes) noexcept override;
  void synchronize(const char* what) override { (void)what; }

  // HostKernelDevice's policy: host addresses as they are, kernels run now.
  template <class T>
  T* translate(T* p) const {
    return p;
  }
  template <class F>
  void run(F&& f) {
    std::forward<F>(f)();
  }

 protected:
  void copy_to_host_bytes(const void* src, void* dst, size_t bytes) override;
  void copy_from_host_bytes(const void* src, void* dst, size_t bytes) override;
  void copy_bytes(const void* src, void* dst, size_t bytes) override;
};

}  // namespace shardlab
