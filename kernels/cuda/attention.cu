// The math of kernels/cpu/attention.h. Per batch row b the four products of each head are
// strided-batched cuBLAS GEMMs over the heads: head h's q, k and v start at
// qkv + b*T*3C + h*d (+ C, + 2C) with leading dimension 3C, so the heads are d floats apart;
// the score and probability matrices of one batch row are T*T floats apart.
//
// The masked softmax (forward) and its backward are kernels with one warp per score row
// (kernels/cuda/warp_rows.cuh), in float and in the CPU's order: the max left to right with
// std::max's comparison, exp(s - max) element by element, the sum and the dot added left to
// right, 1/sum once; the entries above the diagonal are set to exactly 0. Given the same scores,
// the probabilities differ from the CPU only through the device's expf (not glibc's); the softmax
// backward is bit-identical given the same dP and P. The GEMMs are cuBLAS's (FP32, no TF32 when
// the handle comes from make_cublas_handle), whose summation order is not OpenBLAS's.
// Deterministic, no atomics.
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/cublas_api.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/warp_rows.cuh"

namespace shardlab::kernels {

namespace {

using cuda_detail::add_lanes_in_order;
using cuda_detail::kFullMask;
using cuda_detail::kWarpSize;

// p: rows * T scores, row r is query position r % T of its (batch, head). In place.
__global__ void causal_softmax_kernel(float* __restrict__ p, int64_t rows, int64_t T) {
  const int lane = threadIdx.x % kWarpSize;
  for (int64_t r = cuda_detail::warp_first_row(); r < rows; r += cuda_detail::warp_row_step()) {
    float* row = p + r * T;
    const int64_t len = r % T + 1;  // columns 0..i
    float mx = 0;
    for (int64_t c0 = 0; c0 < len; c0 += kWarpSize) {
      const int64_t c = c0 + lane;
      const float v = c < len ? row[c] : 0.0f;
      const int count = static_cast<int>(len - c0 < kWarpSize ? len - c0 : kWarpSize);
      for (int l = 0; l < count; ++l) {
        const float u = __shfl_sync(kFullMask, v, l);
        if (c0 + l == 0 || mx < u) mx = u;  // mx = std::max(mx, u)
      }
    }
    float sum = 0;
    for (int64_t c0 = 0; c0 < len; c0 += kWarpSize) {
      const int64_t c = c0 + lane;
      float e = 0.0f;
      if (c < len) {
        e = expf(row[c] - mx);
        row[c] = e;
      }
      const int count = static_cast<int>(len - c0 < kWarpSize ? len - c0 : kWarpSize);
      sum = add_lanes_in_order(sum, e, count);
    }
    const float inv = 1.0f / sum;
    for (int64_t c = lane; c < T; c += kWarpSize) row[c] = c < len ? row[c] * inv : 0.0f;
  }
}

// ds: rows * T values of dP, replaced by dS = P * (dP - sum_j dP_j P_j) below the diagonal and 0
// above it; p: the matching probabilities.
__global__ void causal_softmax_backward_kernel(float* __restrict__ ds, const float* __restrict__ p,
                                               int64_t rows, int64_t T) {
  const int lane = threadIdx.x % kWarpSize;
  for (int64_t r = cuda_detail::warp_first_row(); r < rows; r += cuda_detail::warp_row_step()) {
    float* drow = ds + r * T;
    const float* prow = p + r * T;
    const int64_t len = r % T + 1;
    float dot = 0;
    for (int64_t c0 = 0; c0 < len; c0 += kWarpSize) {
      const int64_t c = c0 + lane;
      const float v = c < len ? drow[c] * prow[c] : 0.0f;
      const int count = static_cast<int>(len - c0 < kWarpSize ? len - c0 : kWarpSize);
      dot = add_lanes_in_order(dot, v, count);
    }
    for (int64_t c = lane; c < T; c += kWarpSize)
      drow[c] = c < len ? prow[c] * (drow[c] - dot) : 0.0f;
  }
}

struct Geometry {
  int64_t B, T, H, D, C, C3;
  float scale;
};

// Validates the dims; false when there is nothing to compute.
bool geometry(const char* call, const AttentionDims& dims, Geometry& g) {
  if (dims.batch < 0 || dims.steps < 0 || dims.heads < 0 || dims.head_dim < 0)
    throw std::runtime_error(std::string(call) + ": negative dims (batch " +
                             std::to_string(dims.batch) + ", steps " + std::to_string(dims.steps) +
                             ", heads " + std::to_string(dims.heads) + ", head_dim " +
                             std::to_string(dims.head_dim) + ")");
  if (dims.batch == 0 || dims.steps == 0 || dims.heads == 0) return false;
  if (dims.head_dim == 0) throw std::runtime_error(std::string(call) + ": head_dim must be > 0");
  g.B = dims.batch;
  g.T = dims.steps;
  g.H = dims.heads;
  g.D = dims.head_dim;
  g.C = dims.width();
  g.C3 = 3 * g.C;
  g.scale = 1.0f / std::sqrt(static_cast<float>(g.D));
  return true;
}

cudaStream_t stream_of(const char* call, cublasHandle_t handle) {
  cudaStream_t s = nullptr;
  const cublasStatus_t st = cublas_api().get_stream(handle, &s);
  if (st != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(call) + ": cublasGetStream: " + cublas_status_name(st));
  return s;
}

}  // namespace

void causal_attention_forward_cuda(const AttentionDims& dims, const float* qkv, float* probs,
                                   float* att, cublasHandle_t handle) {
  constexpr const char* kName = "causal_attention_forward_cuda";
  Geometry g{};
  if (!geometry(kName, dims, g)) return;
  const cudaStream_t stream = stream_of(kName, handle);
  const int64_t TT = g.T * g.T;
  // Scores of every (batch, head): S = scale q k^T, [T, T] per head.
  for (int64_t b = 0; b < g.B; ++b) {
    const float* q = qkv + b * g.T * g.C3;
    gemm_strided_batched_cuda(handle, Trans::No, Trans::Yes, g.T, g.T, g.D, g.scale, q, g.C3, g.D,
                              q + g.C, g.C3, g.D, 0.0f, probs + b * g.H * TT, g.T, TT, g.H);
  }
  const int64_t rows = g.B * g.H * g.T;
  causal_softmax_kernel<<<cuda_detail::row_blocks(rows), cuda_detail::kThreads, 0, stream>>>(
      probs, rows, g.T);
  cuda_detail::check_launch(kName);
  // out = P v into each head's columns of att.
  for (int64_t b = 0; b < g.B; ++b) {
    const float* v = qkv + b * g.T * g.C3 + 2 * g.C;
    gemm_strided_batched_cuda(handle, Trans::No, Trans::No, g.T, g.D, g.T, 1.0f,
                              probs + b * g.H * TT, g.T, TT, v, g.C3, g.D, 0.0f,
                              att + b * g.T * g.C, g.C, g.D, g.H);
  }
}

void causal_attention_backward_cuda(const AttentionDims& dims, const float* qkv, const float* probs,
                                    const float* datt, float* dqkv, float* dscores,
                                    cublasHandle_t handle) {
  constexpr const char* kName = "causal_attention_backward_cuda";
  Geometry g{};
  if (!geometry(kName, dims, g)) return;
  const cudaStream_t stream = stream_of(kName, handle);
  const int64_t TT = g.T * g.T;
  const int64_t rows = g.H * g.T;  // score rows of one batch row
  for (int64_t b = 0; b < g.B; ++b) {
    const float* q = qkv + b * g.T * g.C3;
    const float* k = q + g.C;
    const float* v = q + 2 * g.C;
    const float* p = probs + b * g.H * TT;
    const float* dout = datt + b * g.T * g.C;
    float* dq = dqkv + b * g.T * g.C3;
    float* dk = dq + g.C;
    float* dv = dq + 2 * g.C;
    // dP = dout v^T and dv = P^T dout.
    gemm_strided_batched_cuda(handle, Trans::No, Trans::Yes, g.T, g.T, g.D, 1.0f, dout, g.C, g.D, v,
                              g.C3, g.D, 0.0f, dscores, g.T, TT, g.H);
    gemm_strided_batched_cuda(handle, Trans::Yes, Trans::No, g.T, g.D, g.T, 1.0f, p, g.T, TT, dout,
                              g.C, g.D, 0.0f, dv, g.C3, g.D, g.H);
    causal_softmax_backward_kernel<<<cuda_detail::row_blocks(rows), cuda_detail::kThreads, 0,
                                     stream>>>(dscores, p, rows, g.T);
    cuda_detail::check_launch(kName);
    // S = scale q k^T, so dq = scale dS k and dk = scale dS^T q.
    gemm_strided_batched_cuda(handle, Trans::No, Trans::No, g.T, g.D, g.T, g.scale, dscores, g.T,
                              TT, k, g.C3, g.D, 0.0f, dq, g.C3, g.D, g.H);
    gemm_strided_batched_cuda(handle, Trans::Yes, Trans::No, g.T, g.D, g.T, g.scale, dscores, g.T,
                              TT, q, g.C3, g.D, 0.0f, dk, g.C3, g.D, g.H);
  }
}

}  // namespace shardlab::kernels
