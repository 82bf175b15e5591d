// The math of kernels/cpu/embedding.h. Forward: one thread per output element (a copy, plus one
// float add with the position row): bit-identical. Backward without atomics, in the CPU's order:
// one thread per (segment, column) of the host-built EmbeddingGradIndex adds its rows in
// increasing order onto the existing dtable value, and one thread per (position, column) adds the
// rows at that position (position, position + steps, ...) in increasing order onto dpos. Every
// output element thus sums the same terms in the same order as the CPU: bit-identical and
// deterministic.
#include <stdexcept>
#include <string>

#include "kernels/cuda/embedding.h"
#include "kernels/cuda/launch.cuh"

namespace shardlab::kernels {

namespace {

__global__ void embedding_forward_kernel(const int32_t* __restrict__ ids,
                                         const float* __restrict__ table,
                                         const float* __restrict__ pos, float* __restrict__ y,
                                         int64_t total, int64_t steps, int64_t dim) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += stride) {
    const int64_t i = e / dim;
    const int64_t j = e - i * dim;
    float v = table[static_cast<int64_t>(ids[i]) * dim + j];
    if (pos != nullptr) v += pos[(i % steps) * dim + j];
    y[e] = v;
  }
}

// Thread (s, j) over segments * dim: adjacent threads take adjacent columns of the same segment.
__global__ void embedding_table_grad_kernel(const int32_t* __restrict__ order,
                                            const int32_t* __restrict__ seg_start,
                                            const int32_t* __restrict__ seg_id,
                                            const float* __restrict__ dy,
                                            float* __restrict__ dtable, int64_t total,
                                            int64_t dim) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += stride) {
    const int64_t s = e / dim;
    const int64_t j = e - s * dim;
    float* dst = dtable + static_cast<int64_t>(seg_id[s]) * dim + j;
    float acc = *dst;
    const int32_t end = seg_start[s + 1];
    for (int32_t k = seg_start[s]; k < end; ++k)
      acc += dy[static_cast<int64_t>(order[k]) * dim + j];
    *dst = acc;
  }
}

// Thread (t, j) over positions * dim (positions = min(n, steps)).
__global__ void embedding_pos_grad_kernel(const float* __restrict__ dy, float* __restrict__ dpos,
                                          int64_t n, int64_t positions, int64_t steps,
                                          int64_t dim) {
  const int64_t total = positions * dim;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += stride) {
    const int64_t t = e / dim;
    const int64_t j = e - t * dim;
    float acc = dpos[e];
    for (int64_t i = t; i < n; i += steps) acc += dy[i * dim + j];
    dpos[e] = acc;
  }
}

void check_sizes(const char* kernel, int64_t n, int64_t steps, int64_t dim, bool with_pos) {
  cuda_detail::check_n(kernel, n);
  cuda_detail::check_n(kernel, steps);
  cuda_detail::check_n(kernel, dim);
  if (with_pos && n > 0 && steps == 0)
    throw std::runtime_error(std::string(kernel) + ": steps must be > 0 with a position table");
}

}  // namespace

void embedding_forward_cuda(const int32_t* ids, const float* table, const float* pos, float* y,
                            int64_t n, int64_t steps, int64_t dim, cudaStream_t stream) {
  constexpr const char* kName = "embedding_forward_cuda";
  check_sizes(kName, n, steps, dim, pos != nullptr);
  if (n == 0 || dim == 0) return;
  const int64_t total = n * dim;
  embedding_forward_kernel<<<cuda_detail::blocks_for(total), cuda_detail::kThreads, 0, stream>>>(
      ids, table, pos, y, total, steps, dim);
  cuda_detail::check_launch(kName);
}

void embedding_backward_cuda(const EmbeddingGradIndexCuda& index, const float* dy, float* dtable,
                             float* dpos, int64_t n, int64_t steps, int64_t dim,
                             cudaStream_t stream) {
  constexpr const char* kName = "embedding_backward_cuda";
  check_sizes(kName, n, steps, dim, dpos != nullptr);
  cuda_detail::check_n(kName, index.segments);
  if (n == 0 || dim == 0) return;
  if (index.segments > 0) {
    const int64_t total = index.segments * dim;
    embedding_table_grad_kernel<<<cuda_detail::blocks_for(total), cuda_detail::kThreads, 0,
                                  stream>>>(index.order, index.seg_start, index.seg_id, dy, dtable,
                                            total, dim);
    cuda_detail::check_launch(kName);
  }
  if (dpos != nullptr) {
    // Positions at or past n (fewer rows than steps) have no rows: they are left alone.
    const int64_t positions = n < steps ? n : steps;
    embedding_pos_grad_kernel<<<cuda_detail::blocks_for(positions * dim), cuda_detail::kThreads, 0,
                                stream>>>(dy, dpos, n, positions, steps, dim);
    cuda_detail::check_launch(kName);
  }
}

}  // namespace shardlab::kernels
