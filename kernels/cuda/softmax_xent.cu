// The math of kernels/cpu/softmax_xent.h in the CPU's order of operations. Forward: one warp per
// row (kernels/cuda/warp_rows.cuh): the max is found left to right with the CPU's comparison
// (std::max_element: the first maximal logit, NaN handled alike), the sum of exp(double(l - max))
// is added left to right in double, lse = max + log(sum), probs = float(exp(l - lse)) and
// row_loss = lse - l_target in double. The only source of difference from the CPU is the device's
// double exp and log (CUDA's are within 1 ulp, like glibc's, but not the same functions): the
// double results may differ in the last bit, which the float probs almost never show.
// Backward is element-wise and bit-identical. Deterministic, no atomics.
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/softmax_xent.h"
#include "kernels/cuda/warp_rows.cuh"

namespace shardlab::kernels {

namespace {

using cuda_detail::add_lanes_in_order;
using cuda_detail::kFullMask;
using cuda_detail::kWarpSize;

__global__ void xent_forward_kernel(const float* __restrict__ logits,
                                    const int32_t* __restrict__ targets, float* __restrict__ probs,
                                    double* __restrict__ row_loss,
                                    int32_t* __restrict__ row_correct, int64_t rows,
                                    int64_t classes) {
  const int lane = threadIdx.x % kWarpSize;
  for (int64_t r = cuda_detail::warp_first_row(); r < rows; r += cuda_detail::warp_row_step()) {
    const float* lr = logits + r * classes;
    // std::max_element: best = first; for each later element, if (best < it) best = it.
    float mx = 0;
    int64_t arg = 0;
    for (int64_t c0 = 0; c0 < classes; c0 += kWarpSize) {
      const int64_t c = c0 + lane;
      const float v = c < classes ? lr[c] : 0.0f;
      const int count = static_cast<int>(classes - c0 < kWarpSize ? classes - c0 : kWarpSize);
      for (int l = 0; l < count; ++l) {
        const float u = __shfl_sync(kFullMask, v, l);
        if (c0 + l == 0 || mx < u) {
          mx = u;
          arg = c0 + l;
        }
      }
    }
    double sum = 0;
    for (int64_t c0 = 0; c0 < classes; c0 += kWarpSize) {
      const int64_t c = c0 + lane;
      const double e = c < classes ? exp(static_cast<double>(lr[c] - mx)) : 0.0;
      const int count = static_cast<int>(classes - c0 < kWarpSize ? classes - c0 : kWarpSize);
      sum = add_lanes_in_order(sum, e, count);
    }
    const double lse = mx + log(sum);
    float* pr = probs + r * classes;
    for (int64_t c = lane; c < classes; c += kWarpSize)
      pr[c] = static_cast<float>(exp(lr[c] - lse));
    if (lane == 0) {
      const int32_t t = targets[r];
      row_loss[r] = lse - lr[t];
      if (row_correct != nullptr) row_correct[r] = arg == t ? 1 : 0;
    }
  }
}

// dlogits may alias probs: no __restrict__ on those.
__global__ void xent_backward_kernel(const float* probs, const int32_t* __restrict__ targets,
                                     float* dlogits, int64_t n, int64_t classes, float scale) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const int64_t r = i / classes;
    float d = probs[i] * scale;
    if (i - r * classes == targets[r]) d -= scale;
    dlogits[i] = d;
  }
}

}  // namespace

void softmax_xent_forward_cuda(const float* logits, const int32_t* targets, float* probs,
                               double* row_loss, int32_t* row_correct, int64_t rows,
                               int64_t classes, cudaStream_t stream) {
  constexpr const char* kName = "softmax_xent_forward_cuda";
  cuda_detail::check_n(kName, rows);
  cuda_detail::check_n(kName, classes);
  if (rows == 0) return;
  if (classes == 0) throw std::runtime_error(std::string(kName) + ": classes must be > 0");
  xent_forward_kernel<<<cuda_detail::row_blocks(rows), cuda_detail::kThreads, 0, stream>>>(
      logits, targets, probs, row_loss, row_correct, rows, classes);
  cuda_detail::check_launch(kName);
}

void softmax_xent_backward_cuda(const float* probs, const int32_t* targets, float* dlogits,
                                int64_t rows, int64_t classes, float scale, cudaStream_t stream) {
  constexpr const char* kName = "softmax_xent_backward_cuda";
  cuda_detail::check_n(kName, rows);
  cuda_detail::check_n(kName, classes);
  if (rows == 0) return;
  if (classes == 0) throw std::runtime_error(std::string(kName) + ": classes must be > 0");
  const int64_t n = rows * classes;
  xent_backward_kernel<<<cuda_detail::blocks_for(n), cuda_detail::kThreads, 0, stream>>>(
      probs, targets, dlogits, n, classes, scale);
  cuda_detail::check_launch(kName);
}

}  // namespace shardlab::kernels
