// The math of kernels/cpu/vocab_xent.h in the CPU's order of operations. The row reductions run
// one warp per row (kernels/cuda/warp_rows.cuh) and keep the CPU's left-to-right order, not a
// tree, so that they give the CPU's bits:
//  - row_max: the lanes load 32 columns, then every lane scans them in column order with
//    std::max_element's comparison (best = first; best < x takes x), NaN handled alike;
//  - partials: exp(double(l - max)) per lane, added left to right in double
//    (add_lanes_in_order), then cast to float;
//  - argmax: the first column equal to the maximum, found with a ballot per 32 columns.
// probs and row_loss: lse = max + log(double(sum)) per row, probs = float(exp(l - lse)) with l
// widened to double, row_loss = lse - target in double. The backward is element-wise. The device's
// double exp and log are the only difference from the CPU (kernels/cuda/vocab_xent.h).
// Deterministic, no atomics.
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vocab_xent.h"
#include "kernels/cuda/warp_rows.cuh"

namespace shardlab::kernels {

namespace {

using cuda_detail::add_lanes_in_order;
using cuda_detail::kFullMask;
using cuda_detail::kWarpSize;

// The number of valid lanes in the chunk of columns starting at c0.
__device__ inline int chunk_count(int64_t cols, int64_t c0) {
  return static_cast<int>(cols - c0 < kWarpSize ? cols - c0 : kWarpSize);
}

__global__ void row_max_kernel(const float* __restrict__ logits, float* __restrict__ row_max,
                               int64_t rows, int64_t cols) {
  const int lane = threadIdx.x % kWarpSize;
  for (int64_t r = cuda_detail::warp_first_row(); r < rows; r += cuda_detail::warp_row_step()) {
    const float* lr = logits + r * cols;
    float mx = -INFINITY;  // an empty slice
    for (int64_t c0 = 0; c0 < cols; c0 += kWarpSize) {
      const int64_t c = c0 + lane;
      const float v = c < cols ? lr[c] : 0.0f;
      const int count = chunk_count(cols, c0);
      for (int l = 0; l < count; ++l) {
        const float u = __shfl_sync(kFullMask, v, l);
        if (c0 + l == 0 || mx < u) mx = u;
      }
    }
    if (lane == 0) row_max[r] = mx;
  }
}

__global__ void partials_kernel(const float* __restrict__ logits, const float* __restrict__ row_max,
                                const int32_t* __restrict__ targets, int64_t vocab_begin,
                                float* __restrict__ sum_exp, float* __restrict__ target_logit,
                                int64_t rows, int64_t cols) {
  const int lane = threadIdx.x % kWarpSize;
  for (int64_t r = cuda_detail::warp_first_row(); r < rows; r += cuda_detail::warp_row_step()) {
    const float* lr = logits + r * cols;
    const float mx = row_max[r];
    double sum = 0;
    for (int64_t c0 = 0; c0 < cols; c0 += kWarpSize) {
      const int64_t c = c0 + lane;
      // The difference in float, then widened, as on the CPU.
      const double e = c < cols ? exp(static_cast<double>(lr[c] - mx)) : 0.0;
      sum = add_lanes_in_order(sum, e, chunk_count(cols, c0));
    }
    if (lane == 0) {
      sum_exp[r] = static_cast<float>(sum);
      const int64_t t = targets[r] - vocab_begin;
      target_logit[r] = t >= 0 && t < cols ? lr[t] : 0.0f;
    }
  }
}

__global__ void probs_kernel(const float* __restrict__ logits, const float* __restrict__ row_max,
                             const float* __restrict__ sum_exp,
                             const float* __restrict__ target_logit, float* __restrict__ probs,
                             double* __restrict__ row_loss, int64_t rows, int64_t cols) {
  const int lane = threadIdx.x % kWarpSize;
  for (int64_t r = cuda_detail::warp_first_row(); r < rows; r += cuda_detail::warp_row_step()) {
    // float + double: the max is widened, as on the CPU.
    const double lse = row_max[r] + log(static_cast<double>(sum_exp[r]));
    const float* lr = logits + r * cols;
    float* pr = probs + r * cols;
    for (int64_t c = lane; c < cols; c += kWarpSize) pr[c] = static_cast<float>(exp(lr[c] - lse));
    if (lane == 0) row_loss[r] = lse - target_logit[r];
  }
}

// dlogits may alias probs: no __restrict__ on those.
__global__ void backward_kernel(const float* probs, const int32_t* __restrict__ targets,
                                int64_t vocab_begin, float* dlogits, int64_t n, int64_t cols,
                                float inv_rows) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const int64_t r = i / cols;
    // The CPU stores probs * inv_rows, then subtracts inv_rows at the target: two roundings,
    // kept apart here too (--fmad=false).
    float d = probs[i] * inv_rows;
    if (i - r * cols == targets[r] - vocab_begin) d -= inv_rows;
    dlogits[i] = d;
  }
}

__global__ void argmax_neg_id_kernel(const float* __restrict__ logits,
                                     const float* __restrict__ row_max, int64_t vocab_begin,
                                     float* __restrict__ neg_best, int64_t rows, int64_t cols) {
  const int lane = threadIdx.x % kWarpSize;
  for (int64_t r = cuda_detail::warp_first_row(); r < rows; r += cuda_detail::warp_row_step()) {
    const float* lr = logits + r * cols;
    const float mx = row_max[r];
    int64_t hit = -1;
    for (int64_t c0 = 0; c0 < cols && hit < 0; c0 += kWarpSize) {
      const int64_t c = c0 + lane;
      // std::find's test: element == value (NaN never matches).
      const unsigned match = __ballot_sync(kFullMask, c < cols && lr[c] == mx);
      if (match != 0u) hit = c0 + (__ffs(static_cast<int>(match)) - 1);
    }
    if (lane == 0) neg_best[r] = hit >= 0 ? -static_cast<float>(vocab_begin + hit) : -INFINITY;
  }
}

void check_sizes(const char* kernel, int64_t rows, int64_t cols) {
  cuda_detail::check_n(kernel, rows);
  cuda_detail::check_n(kernel, cols);
}

}  // namespace

void vocab_xent_row_max_cuda(const float* logits, float* row_max, int64_t rows, int64_t cols,
                             cudaStream_t stream) {
  constexpr const char* kName = "vocab_xent_row_max_cuda";
  check_sizes(kName, rows, cols);
  if (rows == 0) return;
  row_max_kernel<<<cuda_detail::row_blocks(rows), cuda_detail::kThreads, 0, stream>>>(
      logits, row_max, rows, cols);
  cuda_detail::check_launch(kName);
}

void vocab_xent_partials_cuda(const float* logits, const float* row_max, const int32_t* targets,
                              int64_t vocab_begin, float* sum_exp, float* target_logit,
                              int64_t rows, int64_t cols, cudaStream_t stream) {
  constexpr const char* kName = "vocab_xent_partials_cuda";
  check_sizes(kName, rows, cols);
  if (rows == 0) return;
  partials_kernel<<<cuda_detail::row_blocks(rows), cuda_detail::kThreads, 0, stream>>>(
      logits, row_max, targets, vocab_begin, sum_exp, target_logit, rows, cols);
  cuda_detail::check_launch(kName);
}

void vocab_xent_probs_cuda(const float* logits, const float* row_max, const float* sum_exp,
                           const float* target_logit, float* probs, double* row_loss, int64_t rows,
                           int64_t cols, cudaStream_t stream) {
  constexpr const char* kName = "vocab_xent_probs_cuda";
  check_sizes(kName, rows, cols);
  if (rows == 0) return;
  probs_kernel<<<cuda_detail::row_blocks(rows), cuda_detail::kThreads, 0, stream>>>(
      logits, row_max, sum_exp, target_logit, probs, row_loss, rows, cols);
  cuda_detail::check_launch(kName);
}

void vocab_xent_backward_cuda(const float* probs, const int32_t* targets, int64_t vocab_begin,
                              float* dlogits, int64_t rows, int64_t cols, float inv_rows,
                              cudaStream_t stream) {
  constexpr const char* kName = "vocab_xent_backward_cuda";
  check_sizes(kName, rows, cols);
  if (rows == 0 || cols == 0) return;
  const int64_t n = rows * cols;
  backward_kernel<<<cuda_detail::blocks_for(n), cuda_detail::kThreads, 0, stream>>>(
      probs, targets, vocab_begin, dlogits, n, cols, inv_rows);
  cuda_detail::check_launch(kName);
}

void vocab_xent_argmax_neg_id_cuda(const float* logits, const float* row_max, int64_t vocab_begin,
                                   float* neg_best, int64_t rows, int64_t cols,
                                   cudaStream_t stream) {
  constexpr const char* kName = "vocab_xent_argmax_neg_id_cuda";
  check_sizes(kName, rows, cols);
  if (rows == 0) return;
  argmax_neg_id_kernel<<<cuda_detail::row_blocks(rows), cuda_detail::kThreads, 0, stream>>>(
      logits, row_max, vocab_begin, neg_best, rows, cols);
  cuda_detail::check_launch(kName);
}

}  // namespace shardlab::kernels
