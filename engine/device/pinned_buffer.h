// PinnedBuffer<T>: page-locked host memory for transfers between host and device. A
// cudaMemcpyAsync from pageable memory synchronises the stream first, and one to pageable memory
// returns only when the copy is done (both unbounded waits); from and to page-locked memory the
// copies are truly asynchronous, so the only wait is CudaContext::sync (bounded). Not counted by
// the memory ledger (host staging, not a rank's tensors).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "engine/device/cuda_context.h"

namespace shardlab {

template <class T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t n) { reserve(n); }
  ~PinnedBuffer() { free(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // At least n elements; contents unspecified after a growth. Throws DeviceError.
  T* reserve(size_t n) {
    if (n > capacity_) {
      free();
      void* p = nullptr;
      SL_CUDA_CHECK(cudaMallocHost(&p, n * sizeof(T)),
                    "cudaMallocHost (staging for host transfers)");
      p_ = static_cast<T*>(p);
      capacity_ = n;
    }
    return p_;
  }
  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return capacity_; }

 private:
  void free() noexcept {
    if (p_) (void)cudaFreeHost(p_);
    p_ = nullptr;
    capacity_ = 0;
  }

  T* p_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace shardlab
