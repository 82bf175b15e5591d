#include "engine/device/test_device.h"

#include <cstring>

namespace shardlab {

namespace {
constexpr size_t kDefaultArena = size_t{4} << 30;
}

TestDevice::TestDevice(const DeviceOptions& options)
    : timeout_s_(options.timeout_s),
      memory_(std::make_unique<TestMemory>(options.test_arena_bytes ? options.test_arena_bytes
                                                                    : kDefaultArena)),
      stream_(std::make_unique<StreamThread>("test device's stream")) {}

TestDevice::~TestDevice() {
  release_staging();
  stream_.reset();  // runs what is queued (frees included) before the memory goes
}

void* TestDevice::allocate(size_t bytes, const char* what) {
  // Free ranges are zero (never written, or punched when freed), so nothing is queued.
  return memory_->allocate(bytes, what);
}

void TestDevice::deallocate(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  // After the work that may still read it, as cudaFreeAsync: the range is zeroed and reusable
  // only once the stream reaches this point.
  TestMemory* mem = memory_.get();
  try {
    stream_->queue([mem, p, bytes] {
      mem->zero(p, bytes);
      mem->release(p, bytes);
    });
  } catch (...) {
    // Out of memory queueing a free: leak the range rather than free it under a running kernel.
  }
}

void TestDevice::synchronize(const char* what) {
  stream_->wait(what, timeout_s_);
}

void TestDevice::copy_to_host_bytes(const void* src, void* dst, size_t bytes) {
  const void* from = translate(src);
  stream_->queue([=] { std::memcpy(dst, from, bytes); });
  stream_->wait("copy to host", timeout_s_);
  count_to_host(bytes);
}

void TestDevice::copy_from_host_bytes(const void* src, void* dst, size_t bytes) {
  void* to = translate(dst);
  stream_->queue([=] { std::memcpy(to, src, bytes); });
  stream_->wait("copy from host", timeout_s_);
  count_from_host(bytes);
}

void TestDevice::copy_bytes(const void* src, void* dst, size_t bytes) {
  const void* from = translate(src);
  void* to = translate(dst);
  stream_->queue([=] { std::memmove(to, from, bytes); });
}

}  // namespace shardlab
