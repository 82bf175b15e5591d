// The arithmetic of one optimizer step that every training path shares: the single-process
// Trainer and the sharded strategies call these same functions, so a run gives the same numbers
// however it is spread over ranks.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace shardlab {

// Sum of squares in double, in index order.
double squared_norm(std::span<const float> values);

// torch.nn.utils.clip_grad_norm_: max_norm / (total_norm + 1e-6), clamped to at most 1.
// max_norm <= 0 means no clipping: returns 1.
double clip_coefficient(double total_norm, double max_norm);

// The indices of micro-batch m (0-based) of `count` equal micro-batches cut from `indices` in
// order: elements [m*n/count, (m+1)*n/count) where n = indices.size() (n divisible by count).
// Throws InvalidArgument unless count >= 1, 0 <= m < count and count divides n.
std::vector<int64_t> micro_batch(const std::vector<int64_t>& indices, int64_t count, int64_t m);

}  // namespace shardlab
