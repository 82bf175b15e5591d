// Internal to the NCCL backend: check macros for CUDA runtime and NCCL return codes, a guard that
// makes a GPU current for a scope, and bounded polling of a non-blocking NCCL communicator.
//
// Every CUDA and NCCL call goes through SL_NCCL_CUDA_CHECK (the engine's one CUDA check,
// engine/core/cuda_check.h, throwing CommError: in this backend a failed CUDA call fails the
// collective) or SL_NCCL_CHECK, which throw CommError naming the call, the library's own message
// and file:line (in where()). SL_NCCL_CHECK lets ncclInProgress through and returns the code: on
// a non-blocking communicator (the only kind this backend makes) it means "accepted, still
// running", and the caller polls for the outcome.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <string>
#include <thread>

#include "engine/comm/communicator.h"
#include "engine/core/cuda_check.h"
#include "engine/core/error.h"

#define SL_NCCL_CUDA_CHECK(call) SL_CUDA_CHECK_T(::shardlab::CommError, call, "CUDA call " #call)

namespace shardlab::nccl_detail {

// NCCL's own text for the last failure on `comm` (may be null), in parentheses, or "".
inline std::string nccl_last_error(ncclComm_t comm) {
  const char* text = ncclGetLastError(comm);
  return text && *text ? fmt::format(" ({})", text) : std::string();
}

inline ncclResult_t check_nccl(ncclResult_t rc, const char* call, const char* file, int line) {
  if (rc == ncclSuccess || rc == ncclInProgress) return rc;
  throw CommError(fmt::format("NCCL call {} failed: {}{}", call, ncclGetErrorString(rc),
                              nccl_last_error(nullptr)),
                  ::shardlab::detail::where(file, line, call));
}

// Makes `device` current for the enclosing scope and restores the previous device after, so the
// backend never leaves the caller's thread on a different GPU. CUDA's current device is
// per-thread, and a communicator's handles may be waited on from any thread.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    SL_NCCL_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ == device) return;
    SL_NCCL_CUDA_CHECK(cudaSetDevice(device));
    changed_ = true;
  }
  ~DeviceGuard() {
    if (changed_) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

// Polling cadence: yield for the first rounds (small operations finish within microseconds), then
// sleep, so that a long wait does not burn a core that other ranks' threads may need.
class Backoff {
 public:
  void pause() {
    ++rounds_;
    if (rounds_ < 100)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(rounds_ < 2000 ? 20 : 500));
  }

 private:
  int rounds_ = 0;
};

// Polls `comm` until NCCL has finished a call it accepted with ncclInProgress (init, split,
// finalize, or an operation that first had to connect to its peers). Returns false when `deadline`
// passes first; throws CommError, prefixed with `what`, when NCCL reports a failure.
inline bool poll_ready(ncclComm_t comm, Clock::time_point deadline, const std::string& what) {
  Backoff backoff;
  for (;;) {
    ncclResult_t state = ncclInProgress;
    const ncclResult_t rc = ncclCommGetAsyncError(comm, &state);
    if (rc != ncclSuccess) state = rc;
    if (state == ncclSuccess) return true;
    if (state != ncclInProgress)
      throw CommError(fmt::format("{}: NCCL reported {}{}", what, ncclGetErrorString(state),
                                  nccl_last_error(comm)),
                      ::shardlab::detail::where(__FILE__, __LINE__, "ncclCommGetAsyncError"));
    if (Clock::now() >= deadline) return false;
    backoff.pause();
  }
}

}  // namespace shardlab::nccl_detail

#define SL_NCCL_CHECK(call) ::shardlab::nccl_detail::check_nccl((call), #call, __FILE__, __LINE__)
