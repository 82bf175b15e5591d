// Shared by the .cu files only (no public API): launch geometry and the launch check.
//
// kernels/ depends on nothing of ours (resources/docs/design.md), so launch failures are
// std::runtime_error rather than shardlab::Error; shardlab::Error derives from std::runtime_error,
// so a caller that catches either sees them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace shardlab::kernels::cuda_detail {

constexpr int kThreads = 256;
// Enough blocks to fill any current GPU several times over (H100: 132 SMs x 8 blocks of 256);
// larger ranges are covered by the grid-stride loops.
constexpr int64_t kMaxBlocks = 4096;

inline int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < kMaxBlocks ? b : kMaxBlocks);
}

[[noreturn]] inline void fail(const char* kernel, const char* what, cudaError_t e) {
  throw std::runtime_error(std::string(kernel) + ": " + what + ": " + cudaGetErrorName(e) + " (" +
                           cudaGetErrorString(e) + ")");
}

inline void check(const char* kernel, const char* what, cudaError_t e) {
  if (e != cudaSuccess) fail(kernel, what, e);
}

// After a launch: reports a bad configuration or a sticky error from earlier work on the device.
// Never synchronises.
inline void check_launch(const char* kernel) {
  check(kernel, "launch failed", cudaGetLastError());
}

inline void check_n(const char* kernel, int64_t n) {
  if (n < 0)
    throw std::runtime_error(std::string(kernel) + ": n must be >= 0, got " + std::to_string(n));
}

}  // namespace shardlab::kernels::cuda_detail
