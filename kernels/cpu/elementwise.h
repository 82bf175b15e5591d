// Small element-wise and per-column operations the layers need around their GEMMs: residual add,
// scaling, bias add and the bias gradient. CPU reference of kernels/cuda/elementwise.h.
#pragma once

#include <cstdint>

namespace shardlab::kernels {

// out = a + b (n floats); out may alias a or b.
void add(const float* a, const float* b, float* out, int64_t n);
// x *= s (n floats).
void scale(float* x, int64_t n, float s);
// y[r, c] += bias[c] for y [rows, cols].
void bias_add(float* y, const float* bias, int64_t rows, int64_t cols);
// dbias[c] += sum_r dy[r, c] for dy [rows, cols], the rows added in increasing order onto the
// existing value (the same bits from any implementation keeping that order).
void bias_grad(const float* dy, float* dbias, int64_t rows, int64_t cols);

}  // namespace shardlab::kernels
