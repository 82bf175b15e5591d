#include "engine/device/cuda_context.h"

#include <fmt/format.h>

#include <chrono>
#include <exception>
#include <thread>

#include "engine/core/device.h"
#include "kernels/cuda/cublas_api.h"
#include "kernels/cuda/gemm.h"

namespace shardlab {

void cublas_check(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  SL_THROW(DeviceError, "{}: {} ({})", what, kernels::cublas_status_name(status),
           kernels::cublas_status_string(status));
}

CudaContext::CudaContext(int device) : device_(device) {
  SL_ENFORCE(device >= 0, "CudaContext: device must be >= 0, got {}", device);
  SL_CUDA_CHECK(cudaSetDevice(device), "cudaSetDevice");
  // Non-blocking: the stream does not wait for (nor hold up) the legacy default stream, which
  // libraries and cudaMemset use.
  SL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  try {
    cublas_ = kernels::make_cublas_handle(stream_);
  } catch (const std::exception& e) {
    (void)cudaStreamDestroy(stream_);
    SL_THROW(DeviceError, "CudaContext: cuBLAS handle on device {}: {}", device, e.what());
  }
}

CudaContext::~CudaContext() {
  // Destroying a stream with work still queued is allowed: its resources go once the work is
  // done. Errors are ignored here (a destructor must not throw; a lost device reports elsewhere).
  (void)cudaSetDevice(device_);
  kernels::destroy_cublas_handle(cublas_);
  if (stream_) (void)cudaStreamDestroy(stream_);
}

std::string CudaContext::describe() const {
  return describe_gpu(device_);
}

void CudaContext::make_current() const {
  SL_CUDA_CHECK(cudaSetDevice(device_), "cudaSetDevice");
}

void CudaContext::order_after_default_stream() const {
  make_current();  // the legacy stream is the current device's
  cudaEvent_t ev = nullptr;
  SL_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
  cudaError_t err = cudaEventRecord(ev, cudaStreamLegacy);
  if (err == cudaSuccess) err = cudaStreamWaitEvent(stream_, ev, 0);
  // Destroying an event that a stream still waits on is allowed (released once it completes).
  (void)cudaEventDestroy(ev);
  SL_CUDA_CHECK(err, "ordering the stream after a new buffer's zero-fill");
}

void CudaContext::sync(const char* what, double timeout_s) const {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // Poll: a few immediate re-checks for the common short wait, then sleeps growing from 20 us to
  // 1 ms, so a long step costs little CPU and a short one little latency.
  auto pause = std::chrono::microseconds(20);
  for (int polls = 0;; ++polls) {
    const cudaError_t err = cudaStreamQuery(stream_);
    if (err == cudaSuccess) return;
    if (err != cudaErrorNotReady) SL_CUDA_CHECK(err, what);
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (waited >= timeout_s)
      SL_THROW(TimeoutError, "{}: the GPU (device {}) did not finish its queued work within {} s",
               what, device_, timeout_s);
    if (polls < 16) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(pause);
    if (pause < std::chrono::milliseconds(1)) pause *= 2;
  }
}

}  // namespace shardlab
