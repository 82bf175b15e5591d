// HostKernelDevice<D>: the kernel table of a device whose kernels are kernels/cpu (the cpu device
// and the test device), written once. D supplies two things:
//   D::at(DevicePtr<T>) -> T*   the address the kernel uses for a device address (cpu: the same;
//                                test: its second, accessible mapping of the same memory)
//   D::run(F&&)                  runs the kernel (cpu: now, on the calling thread; test: queued
//                                on its stream thread)
// Addresses are translated on the queuing thread, so a bad one fails at the call that passed it.
#pragma once

#include <algorithm>
#include <span>
#include <utility>
#include <vector>

#include "engine/device/device.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/range_embedding.h"
#include "kernels/cpu/scale_cast.h"
#include "kernels/cpu/softmax_xent.h"
#include "kernels/cpu/sq_norm.h"
#include "kernels/cpu/vocab_xent.h"

namespace shardlab {

template <class D>
class HostKernelDevice : public Device {
 public:
  void fill(DevicePtr<float> x, int64_t n, float value) override {
    float* p = at(x);
    go([=] { std::fill(p, p + n, value); });
  }
  void gemm(kernels::Trans ta, kernels::Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
            DevicePtr<const float> a, int64_t lda, DevicePtr<const float> b, int64_t ldb,
            float beta, DevicePtr<float> c, int64_t ldc) override {
    const float *A = at(a), *B = at(b);
    float* C = at(c);
    go([=] { kernels::gemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc); });
  }
  void relu_forward(DevicePtr<const float> x, DevicePtr<float> y, int64_t n) override {
    const float* X = at(x);
    float* Y = at(y);
    go([=] { kernels::relu_forward(X, Y, n); });
  }
  void relu_backward(DevicePtr<const float> y, DevicePtr<const float> dy, DevicePtr<float> dx,
                     int64_t n) override {
    const float *Y = at(y), *DY = at(dy);
    float* DX = at(dx);
    go([=] { kernels::relu_backward(Y, DY, DX, n); });
  }
  void gelu_forward(DevicePtr<const float> x, DevicePtr<float> y, DevicePtr<float> tanh_out,
                    int64_t n) override {
    const float* X = at(x);
    float *Y = at(y), *T = at(tanh_out);
    go([=] { kernels::gelu_forward(X, Y, T, n); });
  }
  void gelu_backward(DevicePtr<const float> x, DevicePtr<const float> tanh_in,
                     DevicePtr<const float> dy, DevicePtr<float> dx, int64_t n) override {
    const float *X = at(x), *T = at(tanh_in), *DY = at(dy);
    float* DX = at(dx);
    go([=] { kernels::gelu_backward(X, T, DY, DX, n); });
  }
  void add(DevicePtr<const float> a, DevicePtr<const float> b, DevicePtr<float> out,
           int64_t n) override {
    const float *A = at(a), *B = at(b);
    float* O = at(out);
    go([=] { kernels::add(A, B, O, n); });
  }
  void scale(DevicePtr<float> x, int64_t n, float s) override {
    float* X = at(x);
    go([=] { kernels::scale(X, n, s); });
  }
  void bias_add(DevicePtr<float> y, DevicePtr<const float> bias, int64_t rows,
                int64_t cols) override {
    float* Y = at(y);
    const float* B = at(bias);
    go([=] { kernels::bias_add(Y, B, rows, cols); });
  }
  void bias_grad(DevicePtr<const float> dy, DevicePtr<float> dbias, int64_t rows,
                 int64_t cols) override {
    const float* DY = at(dy);
    float* DB = at(dbias);
    go([=] { kernels::bias_grad(DY, DB, rows, cols); });
  }
  void layer_norm_forward(DevicePtr<const float> x, DevicePtr<const float> weight,
                          DevicePtr<const float> bias, DevicePtr<float> y, DevicePtr<float> xhat,
                          DevicePtr<float> rstd, int64_t rows, int64_t dim, float eps) override {
    const float *X = at(x), *W = at(weight), *B = at(bias);
    float *Y = at(y), *XH = at(xhat), *R = at(rstd);
    go([=] { kernels::layer_norm_forward(X, W, B, Y, XH, R, rows, dim, eps); });
  }
  void layer_norm_backward(DevicePtr<const float> dy, DevicePtr<const float> xhat,
                           DevicePtr<const float> rstd, DevicePtr<const float> weight,
                           DevicePtr<float> dx, DevicePtr<float> dweight, DevicePtr<float> dbias,
                           int64_t rows, int64_t dim) override {
    const float *DY = at(dy), *XH = at(xhat), *R = at(rstd), *W = at(weight);
    float *DX = at(dx), *DW = at(dweight), *DB = at(dbias);
    go([=] { kernels::layer_norm_backward(DY, XH, R, W, DX, DW, DB, rows, dim); });
  }
  void causal_attention_forward(const kernels::AttentionDims& dims, DevicePtr<const float> qkv,
                                DevicePtr<float> probs, DevicePtr<float> att) override {
    const float* Q = at(qkv);
    float *P = at(probs), *A = at(att);
    go([=] { kernels::causal_attention_forward(dims, Q, P, A); });
  }
  void causal_attention_backward(const kernels::AttentionDims& dims, DevicePtr<const float> qkv,
                                 DevicePtr<const float> probs, DevicePtr<const float> datt,
                                 DevicePtr<float> dqkv, DevicePtr<float> dscores) override {
    const float *Q = at(qkv), *P = at(probs), *DA = at(datt);
    float *DQ = at(dqkv), *DS = at(dscores);
    go([=] { kernels::causal_attention_backward(dims, Q, P, DA, DQ, DS); });
  }
  void embedding_forward(DevicePtr<const int32_t> ids, DevicePtr<const float> table,
                         DevicePtr<const float> pos, DevicePtr<float> y, int64_t n, int64_t steps,
                         int64_t dim) override {
    const int32_t* I = at(ids);
    const float *T = at(table), *P = at(pos);
    float* Y = at(y);
    go([=] { kernels::embedding_forward(I, T, P, Y, n, steps, dim); });
  }
  void embedding_backward(DevicePtr<const int32_t> ids, std::span<const int32_t> host_ids,
                          DevicePtr<const float> dy, DevicePtr<float> dtable, DevicePtr<float> dpos,
                          int64_t n, int64_t steps, int64_t dim, int64_t vocab) override {
    (void)host_ids, (void)vocab;
    const int32_t* I = at(ids);
    const float* DY = at(dy);
    float *DT = at(dtable), *DP = at(dpos);
    go([=] { kernels::embedding_backward(I, DY, DT, DP, n, steps, dim); });
  }
  void softmax_xent_forward(DevicePtr<const float> logits, DevicePtr<const int32_t> targets,
                            DevicePtr<float> probs, DevicePtr<double> row_loss,
                            DevicePtr<int32_t> row_correct, int64_t rows,
                            int64_t classes) override {
    const float* L = at(logits);
    const int32_t* T = at(targets);
    float* P = at(probs);
    double* RL = at(row_loss);
    int32_t* RC = at(row_correct);
    go([=] { kernels::softmax_xent_forward(L, T, P, RL, RC, rows, classes); });
  }
  void softmax_xent_backward(DevicePtr<const float> probs, DevicePtr<const int32_t> targets,
                             DevicePtr<float> dlogits, int64_t rows, int64_t classes,
                             float scale) override {
    const float* P = at(probs);
    const int32_t* T = at(targets);
    float* DL = at(dlogits);
    go([=] { kernels::softmax_xent_backward(P, T, DL, rows, classes, scale); });
  }
  void range_embedding_forward(DevicePtr<const int32_t> ids, DevicePtr<const float> table,
                               int64_t begin, int64_t end, DevicePtr<float> y, int64_t n,
                               int64_t dim) override {
    const int32_t* I = at(ids);
    const float* T = at(table);
    float* Y = at(y);
    go([=] { kernels::range_embedding_forward(I, T, begin, end, Y, n, dim); });
  }
  void range_embedding_backward(DevicePtr<const int32_t> ids, std::span<const int32_t> host_ids,
                                DevicePtr<const float> dy, int64_t begin, int64_t end,
                                DevicePtr<float> dtable, DevicePtr<float> dpos, int64_t n,
                                int64_t steps, int64_t dim) override {
    (void)host_ids;
    const int32_t* I = at(ids);
    const float* DY = at(dy);
    float *DT = at(dtable), *DP = at(dpos);
    go([=] { kernels::range_embedding_backward(I, DY, begin, end, DT, DP, n, steps, dim); });
  }
  void vocab_xent_row_max(DevicePtr<const float> logits, DevicePtr<float> row_max, int64_t rows,
                          int64_t cols) override {
    const float* L = at(logits);
    float* M = at(row_max);
    go([=] { kernels::vocab_xent_row_max(L, M, rows, cols); });
  }
  void vocab_xent_partials(DevicePtr<const float> logits, DevicePtr<const float> row_max,
                           DevicePtr<const int32_t> targets, int64_t vocab_begin,
                           DevicePtr<float> sum_exp, DevicePtr<float> target_logit, int64_t rows,
                           int64_t cols) override {
    const float *L = at(logits), *M = at(row_max);
    const int32_t* T = at(targets);
    float *S = at(sum_exp), *TL = at(target_logit);
    go([=] { kernels::vocab_xent_partials(L, M, T, vocab_begin, S, TL, rows, cols); });
  }
  void vocab_xent_probs(DevicePtr<const float> logits, DevicePtr<const float> row_max,
                        DevicePtr<const float> sum_exp, DevicePtr<const float> target_logit,
                        DevicePtr<float> probs, DevicePtr<double> row_loss, int64_t rows,
                        int64_t cols) override {
    const float *L = at(logits), *M = at(row_max), *S = at(sum_exp), *TL = at(target_logit);
    float* P = at(probs);
    double* RL = at(row_loss);
    go([=] { kernels::vocab_xent_probs(L, M, S, TL, P, RL, rows, cols); });
  }
  void vocab_xent_backward(DevicePtr<const float> probs, DevicePtr<const int32_t> targets,
                           int64_t vocab_begin, DevicePtr<float> dlogits, int64_t rows,
                           int64_t cols, float inv_rows) override {
    const float* P = at(probs);
    const int32_t* T = at(targets);
    float* DL = at(dlogits);
    go([=] { kernels::vocab_xent_backward(P, T, vocab_begin, DL, rows, cols, inv_rows); });
  }
  void vocab_xent_argmax_neg_id(DevicePtr<const float> logits, DevicePtr<const float> row_max,
                                int64_t vocab_begin, DevicePtr<float> neg_best, int64_t rows,
                                int64_t cols) override {
    const float *L = at(logits), *M = at(row_max);
    float* N = at(neg_best);
    go([=] { kernels::vocab_xent_argmax_neg_id(L, M, vocab_begin, N, rows, cols); });
  }
  void sq_norm(DevicePtr<const float> x, int64_t n, DevicePtr<double> out) override {
    const float* X = at(x);
    double* O = at(out);
    go([=] { *O = kernels::sq_norm(X, n); });
  }
  void scale_cast_to_bf16(DevicePtr<const float> in, DevicePtr<uint16_t> out, int64_t n,
                          float scale) override {
    const float* I = at(in);
    uint16_t* O = at(out);
    go([=] { kernels::scale_cast_to_bf16(I, O, n, scale); });
  }
  void scale_cast_from_bf16(DevicePtr<const uint16_t> in, DevicePtr<float> out, int64_t n,
                            float scale) override {
    const uint16_t* I = at(in);
    float* O = at(out);
    go([=] { kernels::scale_cast_from_bf16(I, O, n, scale); });
  }
  void sgd_update(const kernels::SgdArgs& a) override {
    kernels::SgdArgs h = a;
    h.param = raw_at(a.param), h.grad = raw_at(a.grad), h.momentum_buf = raw_at(a.momentum_buf);
    h.param_bf16 = raw_at(a.param_bf16);
    go([h] { kernels::sgd_update(h); });
  }
  void adam_update(const kernels::AdamArgs& a) override {
    kernels::AdamArgs h = a;
    h.param = raw_at(a.param), h.grad = raw_at(a.grad);
    h.exp_avg = raw_at(a.exp_avg), h.exp_avg_sq = raw_at(a.exp_avg_sq);
    h.param_bf16 = raw_at(a.param_bf16);
    go([h] { kernels::adam_update(h); });
  }
  void rmsprop_update(const kernels::RmspropArgs& a) override {
    kernels::RmspropArgs h = a;
    h.param = raw_at(a.param), h.grad = raw_at(a.grad);
    h.square_avg = raw_at(a.square_avg), h.momentum_buf = raw_at(a.momentum_buf);
    h.param_bf16 = raw_at(a.param_bf16);
    go([h] { kernels::rmsprop_update(h); });
  }
  void adagrad_update(const kernels::AdagradArgs& a) override {
    kernels::AdagradArgs h = a;
    h.param = raw_at(a.param), h.grad = raw_at(a.grad), h.sum = raw_at(a.sum);
    h.param_bf16 = raw_at(a.param_bf16);
    go([h] { kernels::adagrad_update(h); });
  }

 protected:
  template <class T>
  T* at(DevicePtr<T> p) {
    return static_cast<D*>(this)->translate(p.raw());
  }
  template <class T>
  T* raw_at(T* p) {
    return static_cast<D*>(this)->translate(p);
  }
  template <class F>
  void go(F&& f) {
    static_cast<D*>(this)->run(std::forward<F>(f));
  }
};

}  // namespace shardlab
