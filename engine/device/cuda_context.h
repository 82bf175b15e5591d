// CudaContext: one GPU as a rank uses it: the device, a compute stream, a cuBLAS handle on that
// stream, and a bounded wait for the stream. A CUDA or cuBLAS failure (out of memory, a failed
// launch, a lost device) is a DeviceError (engine/core/error.h) naming the call.
//
// Built only with the CUDA kernels (SHARDLAB_HAVE_CUDA_KERNELS); engine/core/device.h says
// whether this process can use a GPU at all.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

#include "engine/core/cuda_check.h"
#include "engine/core/error.h"

namespace shardlab {

// Throws DeviceError "<what>: <cuBLAS status name> (<description>)" unless `status` is
// CUBLAS_STATUS_SUCCESS. (CUDA runtime calls: SL_CUDA_CHECK, engine/core/cuda_check.h.)
void cublas_check(cublasStatus_t status, const char* what);

// Runs f, a call of kernels/cuda launchers (which report failures as std::runtime_error), and
// rethrows such a failure as DeviceError "<what>: <message>"; the engine's own errors pass.
template <class F>
decltype(auto) device_call(const char* what, F&& f) {
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    SL_THROW(DeviceError, "{}: {}", what, e.what());
  }
}

class CudaContext {
 public:
  // Makes `device` current on the calling thread and creates a non-blocking stream and a cuBLAS
  // handle (FP32 default math, no TF32) on it. Throws DeviceError when the device cannot be used.
  explicit CudaContext(int device = 0);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  // "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)".
  std::string describe() const;

  // Makes this context's device current on the calling thread (for a thread other than the
  // creator).
  void make_current() const;
  // Waits until everything queued on stream() has run, polling (no unbounded
  // cudaStreamSynchronize); throws TimeoutError naming `what` after timeout_s seconds and
  // DeviceError when the queued work failed.
  void sync(const char* what, double timeout_s = 300.0) const;
  // Makes stream() wait, on the device (the host does not wait), for everything queued so far on
  // the legacy default stream (a cudaMemset there, say), which a non-blocking stream is not
  // otherwise ordered after. Call after such work.
  void order_after_default_stream() const;

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
};

}  // namespace shardlab
