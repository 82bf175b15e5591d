// CudaBuffer<T>: an owned cudaMalloc allocation counted by the memory ledger, as TrackedAllocator
// counts host buffers (engine/core/memory.h): cudaMalloc'd, charged to the ledger bound to the
// allocating thread under its category, credited back on release. A device job's parameters,
// gradients, optimizer state and activations are DeviceBuffers, so its ledger counts device
// bytes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "engine/core/memory.h"
#include "engine/device/cuda_context.h"

namespace shardlab {

template <class T>
class CudaBuffer {
 public:
  CudaBuffer() = default;
  // n elements, zero-filled by a cudaMemset on the legacy default stream, which a non-blocking
  // stream is NOT ordered after: work on a context's stream that touches a new (or grown) buffer
  // must first be ordered after it (CudaContext::order_after_default_stream).
  // Throws DeviceError naming the category when the device is out of memory.
  CudaBuffer(MemCategory category, size_t n) : category_(category) { grow(n); }
  ~CudaBuffer() { release(); }
  CudaBuffer(CudaBuffer&& o) noexcept { *this = static_cast<CudaBuffer&&>(o); }
  CudaBuffer& operator=(CudaBuffer&& o) noexcept {
    if (this != &o) {
      release();
      data_ = o.data_, size_ = o.size_, capacity_ = o.capacity_, category_ = o.category_;
      ledger_ = o.ledger_;
      o.data_ = nullptr, o.size_ = o.capacity_ = 0, o.ledger_ = nullptr;
    }
    return *this;
  }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }

  // Sets the size to n; the storage is reallocated (exactly n, zero-filled) only when it is too
  // small, so steady-state steps do not allocate. Contents are unspecified after a growth.
  void resize(size_t n) {
    if (n > capacity_) {
      release();
      grow(n);
    }
    size_ = n;
  }

 private:
  void grow(size_t n) {
    if (n == 0) return;
    void* p = nullptr;
    SL_CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)), to_string(category_));
    const cudaError_t set = cudaMemset(p, 0, n * sizeof(T));
    if (set != cudaSuccess) (void)cudaFree(p);  // not ours yet: the destructor would not free it
    SL_CUDA_CHECK(set, "cudaMemset");
    data_ = static_cast<T*>(p);
    size_ = capacity_ = n;
    ledger_ = current_ledger();
    if (ledger_) ledger_->charge(category_, static_cast<int64_t>(n * sizeof(T)));
  }
  void release() noexcept {
    if (!data_) return;
    (void)cudaFree(data_);
    if (ledger_) ledger_->release(category_, static_cast<int64_t>(capacity_ * sizeof(T)));
    data_ = nullptr;
    size_ = capacity_ = 0;
    ledger_ = nullptr;
  }

  T* data_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
  MemCategory category_ = MemCategory::activations;
  MemoryLedger* ledger_ = nullptr;
};

}  // namespace shardlab
