#include "engine/core/cuda_check.h"

#include <fmt/format.h>

#if SHARDLAB_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace shardlab {

std::string cuda_failure(int code, const std::string& what) {
#if SHARDLAB_HAVE_CUDA
  const auto err = static_cast<cudaError_t>(code);
  (void)cudaGetLastError();
  return fmt::format("{}: {} ({})", what, cudaGetErrorName(err), cudaGetErrorString(err));
#else
  return fmt::format("{}: CUDA error {}", what, code);
#endif
}

std::string cuda_error_text(int code) {
#if SHARDLAB_HAVE_CUDA
  const auto err = static_cast<cudaError_t>(code);
  return fmt::format("{} ({})", cudaGetErrorString(err), cudaGetErrorName(err));
#else
  return fmt::format("CUDA error {}", code);
#endif
}

}  // namespace shardlab
