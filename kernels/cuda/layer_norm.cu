// The math of kernels/cpu/layer_norm.h in the CPU's order of operations, so the results are the
// CPU's bits (device double/float add, multiply, divide and sqrt are IEEE round-to-nearest, and
// the target is built with --fmad=false):
//  - forward: one warp per row (kernels/cuda/warp_rows.cuh). Mean and variance are the CPU's two
//    passes in double, each summed left to right; rstd = float(1 / sqrt(var + eps)) in double;
//    xhat and y element-wise in float as on the CPU.
//  - backward dx: one warp per row; sum(g) and sum(g * xhat) in float, left to right.
//  - backward dweight/dbias: one thread per column adding the rows in increasing order onto the
//    existing value.
// Deterministic, no atomics.
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/layer_norm.h"
#include "kernels/cuda/warp_rows.cuh"

namespace shardlab::kernels {

namespace {

using cuda_detail::add_lanes_in_order;
using cuda_detail::kWarpSize;

// y may alias x (every x is read before the first y is written: the shuffles of the variance pass
// keep the warp together), so neither has __restrict__.
__global__ void ln_forward_kernel(const float* x, const float* __restrict__ weight,
                                  const float* __restrict__ bias, float* y,
                                  float* __restrict__ xhat, float* __restrict__ rstd_out,
                                  int64_t rows, int64_t dim, float eps) {
  const int lane = threadIdx.x % kWarpSize;
  const double inv_dim = 1.0 / static_cast<double>(dim);
  for (int64_t r = cuda_detail::warp_first_row(); r < rows; r += cuda_detail::warp_row_step()) {
    const float* xr = x + r * dim;
    double mean = 0;
    for (int64_t c0 = 0; c0 < dim; c0 += kWarpSize) {
      const int64_t c = c0 + lane;
      const double v = c < dim ? static_cast<double>(xr[c]) : 0.0;
      const int count = static_cast<int>(dim - c0 < kWarpSize ? dim - c0 : kWarpSize);
      mean = add_lanes_in_order(mean, v, count);
    }
    mean *= inv_dim;
    double var = 0;
    for (int64_t c0 = 0; c0 < dim; c0 += kWarpSize) {
      const int64_t c = c0 + lane;
      double d2 = 0.0;
      if (c < dim) {
        const double d = xr[c] - mean;
        d2 = d * d;
      }
      const int count = static_cast<int>(dim - c0 < kWarpSize ? dim - c0 : kWarpSize);
      var = add_lanes_in_order(var, d2, count);
    }
    var *= inv_dim;
    const float rstd = static_cast<float>(1.0 / sqrt(var + eps));
    if (lane == 0) rstd_out[r] = rstd;
    float* hr = xhat + r * dim;
    float* yr = y + r * dim;
    for (int64_t c = lane; c < dim; c += kWarpSize) {
      const float h = static_cast<float>(xr[c] - mean) * rstd;
      hr[c] = h;
      yr[c] = h * weight[c] + bias[c];
    }
  }
}

__global__ void ln_backward_dx_kernel(const float* __restrict__ dy, const float* __restrict__ xhat,
                                      const float* __restrict__ rstd_in,
                                      const float* __restrict__ weight, float* __restrict__ dx,
                                      int64_t rows, int64_t dim) {
  const int lane = threadIdx.x % kWarpSize;
  const float inv_dim = 1.0f / static_cast<float>(dim);
  for (int64_t r = cuda_detail::warp_first_row(); r < rows; r += cuda_detail::warp_row_step()) {
    const float* dyr = dy + r * dim;
    const float* hr = xhat + r * dim;
    float sum_g = 0, sum_gh = 0;
    for (int64_t c0 = 0; c0 < dim; c0 += kWarpSize) {
      const int64_t c = c0 + lane;
      float g = 0, gh = 0;
      if (c < dim) {
        g = dyr[c] * weight[c];
        gh = g * hr[c];
      }
      const int count = static_cast<int>(dim - c0 < kWarpSize ? dim - c0 : kWarpSize);
      sum_g = add_lanes_in_order(sum_g, g, count);
      sum_gh = add_lanes_in_order(sum_gh, gh, count);
    }
    const float mean_g = sum_g * inv_dim, mean_gh = sum_gh * inv_dim;
    const float rstd = rstd_in[r];
    float* dxr = dx + r * dim;
    for (int64_t c = lane; c < dim; c += kWarpSize)
      dxr[c] = rstd * (dyr[c] * weight[c] - mean_g - hr[c] * mean_gh);
  }
}

// One thread per column, the rows in increasing order onto the existing value.
__global__ void ln_backward_params_kernel(const float* __restrict__ dy,
                                          const float* __restrict__ xhat,
                                          float* __restrict__ dweight, float* __restrict__ dbias,
                                          int64_t rows, int64_t dim) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < dim;
       c += stride) {
    float dw = dweight[c], db = dbias[c];
    for (int64_t r = 0; r < rows; ++r) {
      const float d = dy[r * dim + c];
      dw += d * xhat[r * dim + c];
      db += d;
    }
    dweight[c] = dw;
    dbias[c] = db;
  }
}

}  // namespace

void layer_norm_forward_cuda(const float* x, const float* weight, const float* bias, float* y,
                             float* xhat, float* rstd, int64_t rows, int64_t dim, float eps,
                             cudaStream_t stream) {
  constexpr const char* kName = "layer_norm_forward_cuda";
  cuda_detail::check_n(kName, rows);
  cuda_detail::check_n(kName, dim);
  if (rows == 0 || dim == 0) return;
  ln_forward_kernel<<<cuda_detail::row_blocks(rows), cuda_detail::kThreads, 0, stream>>>(
      x, weight, bias, y, xhat, rstd, rows, dim, eps);
  cuda_detail::check_launch(kName);
}

void layer_norm_backward_cuda(const float* dy, const float* xhat, const float* rstd,
                              const float* weight, float* dx, float* dweight, float* dbias,
                              int64_t rows, int64_t dim, cudaStream_t stream) {
  constexpr const char* kName = "layer_norm_backward_cuda";
  cuda_detail::check_n(kName, rows);
  cuda_detail::check_n(kName, dim);
  if (rows == 0 || dim == 0) return;
  ln_backward_dx_kernel<<<cuda_detail::row_blocks(rows), cuda_detail::kThreads, 0, stream>>>(
      dy, xhat, rstd, weight, dx, rows, dim);
  cuda_detail::check_launch(kName);
  ln_backward_params_kernel<<<cuda_detail::column_blocks(dim), cuda_detail::kColumnThreads, 0,
                              stream>>>(dy, xhat, dweight, dbias, rows, dim);
  cuda_detail::check_launch(kName);
}

}  // namespace shardlab::kernels
