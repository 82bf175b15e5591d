// TestDevice: a device whose memory the host cannot read, for proving the device plumbing in CI
// without a GPU ("device": "test"). Its memory is TestMemory (addresses mapped with no access; a
// second mapping for its own kernels), and its stream is a StreamThread: kernels/cpu run there, in
// queue order, through the second mapping. So:
//   - host code that touches device memory without a copy faults at that line;
//   - host code that reads a result without waiting for the stream reads the wrong bytes (the
//     copy functions wait, as on a GPU; anything else is a bug this device exposes);
//   - its results equal the cpu device's bit for bit: the same kernels, in the same order.
// It is a check, not a speed-up: every kernel crosses to another thread.
#pragma once

#include <memory>
#include <string>

#include "engine/device/host_kernels.h"
#include "engine/device/stream_thread.h"
#include "engine/device/test_memory.h"

namespace shardlab {

class TestDevice final : public HostKernelDevice<TestDevice> {
 public:
  // options.test_arena_bytes of address space (0: 4 GiB); options.timeout_s bounds every wait.
  explicit TestDevice(const DeviceOptions& options = {});
  ~TestDevice() override;

  DeviceKind kind() const override { return DeviceKind::test; }
  std::string describe() const override { return "test device (host access blocked)"; }
  void* allocate(size_t bytes, const char* what) override;
  void deallocate(void* p, size_t bytes) noexcept override;
  void synchronize(const char* what) override;

  const TestMemory& memory() const { return *memory_; }

  // HostKernelDevice's policy: the kernel mapping's address, and the work queued on the stream.
  template <class T>
  T* translate(T* p) const {
    return memory_->kernel_address(p);
  }
  template <class F>
  void run(F&& f) {
    stream_->queue(std::forward<F>(f));
  }

 protected:
  void copy_to_host_bytes(const void* src, void* dst, size_t bytes) override;
  void copy_from_host_bytes(const void* src, void* dst, size_t bytes) override;
  void copy_bytes(const void* src, void* dst, size_t bytes) override;

 private:
  double timeout_s_;
  std::unique_ptr<TestMemory> memory_;
  std::unique_ptr<StreamThread> stream_;  // after memory_: stopped (drained) first
};

}  // namespace shardlab
