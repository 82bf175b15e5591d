// One check for CUDA runtime return codes, used by every part of the engine that calls CUDA (the
// GPU training path, the NCCL backend, the GPU benchmarks): a failure throws a typed error of
// engine/core/error.h naming the call and the runtime's own words, with file:line in where().
//
// Compiles without CUDA: the return code is taken as an int (cudaSuccess is 0), so code that is
// built with and without a toolkit can include it. kernels/ keeps its own check (it depends on
// nothing of ours, resources/docs/design.md); engine code that calls kernels/cuda wraps them in
// device_call (engine/device/cuda_context.h).
#pragma once

#include <string>

#include "engine/core/error.h"

namespace shardlab {

// "<what>: <error name> (<description>)", e.g. "cudaMalloc: cudaErrorMemoryAllocation (out of
// memory)", for the CUDA runtime error `code`. Also clears the runtime's "last error", so that a
// non-sticky failure is not reported again by the next, unrelated check (a sticky one, a lost or
// faulted context, comes back from every call anyway). Without CUDA: "<what>: CUDA error <code>".
std::string cuda_failure(int code, const std::string& what);

// "<description> (<error name>)" for the CUDA runtime error `code`, for messages that explain
// rather than throw (no GPU visible, a device that cannot be inspected).
std::string cuda_error_text(int code);

}  // namespace shardlab

// Throws `Type` (an Error of engine/core/error.h) with cuda_failure(code, what) unless `call`
// returns cudaSuccess. `what` names the operation for the user ("cudaMalloc (params)").
#define SL_CUDA_CHECK_T(Type, call, what)                                 \
  do {                                                                    \
    if (const int sl_cuda_rc_ = static_cast<int>(call); sl_cuda_rc_ != 0) \
      throw Type(::shardlab::cuda_failure(sl_cuda_rc_, what),             \
                 ::shardlab::detail::where(__FILE__, __LINE__, #call));   \
  } while (0)

// The usual form: a failed CUDA call is a DeviceError.
#define SL_CUDA_CHECK(call, what) SL_CUDA_CHECK_T(::shardlab::DeviceError, call, what)
