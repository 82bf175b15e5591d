// Dense matrix multiply on the GPU through cuBLAS, with the row-major convention of
// kernels/cpu/gemm.h (cuBLAS is column-major: a row-major C = op(A) op(B) is computed as the
// column-major C^T = op(B)^T op(A)^T, swapping the operands, no copies).
//
// The work runs on the stream set on `handle` (cublasSetStream). FP32 throughout: the handle
// should be in CUBLAS_PEDANTIC_MATH (no TF32, no BF16x9 emulation, whatever the environment
// says), which make_cublas_handle() below ensures. Sizes and leading dimensions must fit in int
// (cuBLAS's types; larger ones throw). Throws std::runtime_error naming the call and the cuBLAS
// status on failure; never synchronises.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cpu/gemm.h"

namespace shardlab::kernels {

// C[m x n] = alpha * op(A) * op(B) + beta * C, row-major, device pointers.
void gemm_cuda(cublasHandle_t handle, Trans ta, Trans tb, int64_t m, int64_t n, int64_t k,
               float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
               float* c, int64_t ldc);

// `batch` such products, matrix i at a + i*stride_a, b + i*stride_b, c + i*stride_c.
void gemm_strided_batched_cuda(cublasHandle_t handle, Trans ta, Trans tb, int64_t m, int64_t n,
                               int64_t k, float alpha, const float* a, int64_t lda,
                               int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b,
                               float beta, float* c, int64_t ldc, int64_t stride_c, int64_t batch);

// A cuBLAS handle on `stream` in CUBLAS_PEDANTIC_MATH (standard FP32: no TF32 tensor-op
// rounding, no emulation); the caller destroys it with destroy_cublas_handle (cublas_api.h). Throws std::runtime_error
// on failure.
cublasHandle_t make_cublas_handle(cudaStream_t stream);

}  // namespace shardlab::kernels
