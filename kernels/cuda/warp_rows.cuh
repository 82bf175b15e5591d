// Shared by the .cu files only (no public API): one warp per row, for the row reductions that
// keep the CPU's order.
//
// The CPU references reduce a row left to right (sum += x[0], x[1], ...). To get the same bits the
// GPU kernels do the same: the warp loads 32 consecutive columns at a time (coalesced, one per
// lane), computes the per-element terms in parallel, then every lane adds the 32 terms in column
// order, reading them with __shfl_sync. Every lane ends with the same total, so no broadcast is
// needed; the adds form one dependent chain per row (as on the CPU), the rows run in parallel.
#pragma once

#include <cstdint>

#include "kernels/cuda/launch.cuh"

namespace shardlab::kernels::cuda_detail {

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kRowsPerBlock = kThreads / kWarpSize;  // one warp per row
// Blocks beyond this cover the rows in a grid-stride loop.
constexpr int64_t kMaxRowBlocks = 65535;

inline int row_blocks(int64_t rows) {
  const int64_t b = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  return static_cast<int>(b < kMaxRowBlocks ? b : kMaxRowBlocks);
}

// The column sums (one thread per column adding the rows in order) launch one warp per block, so
// that a few hundred columns still spread over many SMs.
constexpr int kColumnThreads = kWarpSize;
inline int column_blocks(int64_t cols) {
  const int64_t b = (cols + kColumnThreads - 1) / kColumnThreads;
  return static_cast<int>(b < kMaxRowBlocks ? b : kMaxRowBlocks);
}

// The first row of this warp and the step to its next one (grid-stride over rows).
__device__ inline int64_t warp_first_row() {
  return static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpSize;
}
__device__ inline int64_t warp_row_step() {
  return static_cast<int64_t>(gridDim.x) * kRowsPerBlock;
}

// Adds the first `count` (<= 32) lanes' `v` onto acc, lane 0 first. Every lane of the warp must
// call it with the same count; all of them return the same value.
template <class T>
__device__ inline T add_lanes_in_order(T acc, T v, int count) {
  for (int l = 0; l < count; ++l) acc += __shfl_sync(kFullMask, v, l);
  return acc;
}

}  // namespace shardlab::kernels::cuda_detail
