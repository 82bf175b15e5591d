// The math of kernels/cpu/range_embedding.h. Forward: one thread per output element, a copy or a
// zero: bit-identical. Backward: the range index holds local rows (id - begin) and only the rows in
// range, so the scatter-add is exactly embedding_backward_cuda's (kernels/cuda/embedding.cu): one
// thread per (segment, column) adding its rows in increasing order, one thread per (position,
// column) adding every row at that position in increasing order. Every output element sums the
// same terms in the same order as the CPU: bit-identical and deterministic.
#include <stdexcept>
#include <string>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/range_embedding.h"

namespace shardlab::kernels {

namespace {

__global__ void range_embedding_forward_kernel(const int32_t* __restrict__ ids,
                                               const float* __restrict__ table, int64_t begin,
                                               int64_t end, float* __restrict__ y, int64_t total,
                                               int64_t dim) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += stride) {
    const int64_t i = e / dim;
    const int64_t j = e - i * dim;
    const int64_t id = ids[i];
    y[e] = id >= begin && id < end ? table[(id - begin) * dim + j] : 0.0f;
  }
}

}  // namespace

void range_embedding_forward_cuda(const int32_t* ids, const float* table, int64_t begin,
                                  int64_t end, float* y, int64_t n, int64_t dim,
                                  cudaStream_t stream) {
  constexpr const char* kName = "range_embedding_forward_cuda";
  cuda_detail::check_n(kName, n);
  cuda_detail::check_n(kName, dim);
  if (n == 0 || dim == 0) return;
  const int64_t total = n * dim;
  range_embedding_forward_kernel<<<cuda_detail::blocks_for(total), cuda_detail::kThreads, 0,
                                   stream>>>(ids, table, begin, end, y, total, dim);
  cuda_detail::check_launch(kName);
}

void range_embedding_backward_cuda(const EmbeddingGradIndexCuda& index, const float* dy,
                                   float* dtable, float* dpos, int64_t n, int64_t steps,
                                   int64_t dim, cudaStream_t stream) {
  constexpr const char* kName = "range_embedding_backward_cuda";
  // The same scatter as the full table's, on the index of the rows in range; errors are renamed
  // so that they name this op.
  try {
    embedding_backward_cuda(index, dy, dtable, dpos, n, steps, dim, stream);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(kName) + ": " + e.what());
  }
}

}  // namespace shardlab::kernels
