#include "engine/device/cuda_device.h"

#include <cstdint>
#include <limits>

#include "kernels/cpu/embedding.h"
#include "kernels/cpu/range_embedding.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/adagrad_update.h"
#include "kernels/cuda/adam_update.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/layer_norm.h"
#include "kernels/cuda/range_embedding.h"
#include "kernels/cuda/rmsprop_update.h"
#include "kernels/cuda/scale_cast.h"
#include "kernels/cuda/sgd_update.h"
#include "kernels/cuda/softmax_xent.h"
#include "kernels/cuda/sq_norm.h"
#include "kernels/cuda/vocab_xent.h"

namespace shardlab {

namespace {
// Pointers in Args structs are device addresses already (the caller's DeviceSpans).
template <class F>
void launch(const char* what, F&& f) {
  device_call(what, std::forward<F>(f));
}
}  // namespace

CudaDevice::CudaDevice(const DeviceOptions& options)
    : ctx_(options.index), timeout_s_(options.timeout_s) {
  // Keep freed memory in the pool between steps (the default threshold of 0 gives it back to the
  // system at every synchronisation, and the next step's allocation would call the driver again).
  cudaMemPool_t pool = nullptr;
  SL_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, options.index), "cudaDeviceGetDefaultMemPool");
  uint64_t keep = std::numeric_limits<uint64_t>::max();
  SL_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
                "cudaMemPoolSetAttribute");
}

CudaDevice::~CudaDevice() {
  release_staging();
  if (scratch_) (void)cudaFreeAsync(scratch_, ctx_.stream());
  // The stream's last work (the frees above), bounded like every wait; a failure here has
  // nowhere to go but the next user of the device.
  try {
    ctx_.sync("device teardown", timeout_s_);
  } catch (...) {
  }
}

void* CudaDevice::allocate(size_t bytes, const char* what) {
  ctx_.make_current();
  void* p = nullptr;
  SL_CUDA_CHECK(cudaMallocAsync(&p, bytes == 0 ? 1 : bytes, ctx_.stream()), what);
  const cudaError_t set = cudaMemsetAsync(p, 0, bytes, ctx_.stream());
  if (set != cudaSuccess) (void)cudaFreeAsync(p, ctx_.stream());
  SL_CUDA_CHECK(set, "cudaMemsetAsync");
  return p;
}

void CudaDevice::deallocate(void* p, size_t bytes) noexcept {
  (void)bytes;
  if (p) (void)cudaFreeAsync(p, ctx_.stream());
}

void* CudaDevice::scratch(size_t bytes) {
  if (bytes > scratch_bytes_) {
    if (scratch_) (void)cudaFreeAsync(scratch_, ctx_.stream());
    scratch_ = nullptr;
    scratch_bytes_ = 0;
    SL_CUDA_CHECK(cudaMallocAsync(&scratch_, bytes, ctx_.stream()), "embedding index scratch");
    scratch_bytes_ = bytes;
  }
  return scratch_;
}

void CudaDevice::copy_to_host_bytes(const void* src, void* dst, size_t bytes) {
  SL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx_.stream()),
                "cudaMemcpyAsync to host");
  ctx_.sync("copy to host", timeout_s_);
  count_to_host(bytes);
}

void CudaDevice::copy_from_host_bytes(const void* src, void* dst, size_t bytes) {
  SL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx_.stream()),
                "cudaMemcpyAsync from host");
  ctx_.sync("copy from host", timeout_s_);  // the host memory may be reused when this returns
  count_from_host(bytes);
}

void CudaDevice::copy_bytes(const void* src, void* dst, size_t bytes) {
  SL_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx_.stream()),
                "cudaMemcpyAsync on the device");
}

void CudaDevice::fill(DevicePtr<float> x, int64_t n, float value) {
  if (n <= 0) return;
  if (value == 0.0f) {
    SL_CUDA_CHECK(
        cudaMemsetAsync(x.raw(), 0, static_cast<size_t>(n) * sizeof(float), ctx_.stream()),
        "cudaMemsetAsync");
    return;
  }
  // x = 0 * x + value, through the bias kernel on one row: no dedicated fill kernel needed.
  SL_CUDA_CHECK(cudaMemsetAsync(x.raw(), 0, static_cast<size_t>(n) * sizeof(float), ctx_.stream()),
                "cudaMemsetAsync");
  // One value broadcast: a [n, 1] matrix plus a bias of one element.
  float* one = static_cast<float*>(scratch(sizeof(float)));
  SL_CUDA_CHECK(cudaMemcpyAsync(one, &value, sizeof(float), cudaMemcpyHostToDevice, ctx_.stream()),
                "cudaMemcpyAsync of a fill value");
  ctx_.sync("fill", timeout_s_);  // &value is the host stack's
  launch("fill", [&] { kernels::bias_add_cuda(x.raw(), one, n, 1, ctx_.stream()); });
}

void CudaDevice::gemm(kernels::Trans ta, kernels::Trans tb, int64_t m, int64_t n, int64_t k,
                      float alpha, DevicePtr<const float> a, int64_t lda, DevicePtr<const float> b,
                      int64_t ldb, float beta, DevicePtr<float> c, int64_t ldc) {
  launch("gemm", [&] {
    kernels::gemm_cuda(ctx_.cublas(), ta, tb, m, n, k, alpha, a.raw(), lda, b.raw(), ldb, beta,
                       c.raw(), ldc);
  });
}

void CudaDevice::relu_forward(DevicePtr<const float> x, DevicePtr<float> y, int64_t n) {
  launch("relu", [&] { kernels::relu_forward_cuda(x.raw(), y.raw(), n, ctx_.stream()); });
}

void CudaDevice::relu_backward(DevicePtr<const float> y, DevicePtr<const float> dy,
                               DevicePtr<float> dx, int64_t n) {
  launch("relu backward",
         [&] { kernels::relu_backward_cuda(y.raw(), dy.raw(), dx.raw(), n, ctx_.stream()); });
}

void CudaDevice::gelu_forward(DevicePtr<const float> x, DevicePtr<float> y,
                              DevicePtr<float> tanh_out, int64_t n) {
  launch("gelu",
         [&] { kernels::gelu_forward_cuda(x.raw(), y.raw(), tanh_out.raw(), n, ctx_.stream()); });
}

void CudaDevice::gelu_backward(DevicePtr<const float> x, DevicePtr<const float> tanh_in,
                               DevicePtr<const float> dy, DevicePtr<float> dx, int64_t n) {
  launch("gelu backward", [&] {
    kernels::gelu_backward_cuda(x.raw(), tanh_in.raw(), dy.raw(), dx.raw(), n, ctx_.stream());
  });
}

void CudaDevice::add(DevicePtr<const float> a, DevicePtr<const float> b, DevicePtr<float> out,
                     int64_t n) {
  launch("add", [&] { kernels::add_cuda(a.raw(), b.raw(), out.raw(), n, ctx_.stream()); });
}

void CudaDevice::scale(DevicePtr<float> x, int64_t n, float s) {
  launch("scale", [&] { kernels::scale_cuda(x.raw(), n, s, ctx_.stream()); });
}

void CudaDevice::bias_add(DevicePtr<float> y, DevicePtr<const float> bias, int64_t rows,
                          int64_t cols) {
  launch("bias add",
         [&] { kernels::bias_add_cuda(y.raw(), bias.raw(), rows, cols, ctx_.stream()); });
}

void CudaDevice::bias_grad(DevicePtr<const float> dy, DevicePtr<float> dbias, int64_t rows,
                           int64_t cols) {
  launch("bias grad",
         [&] { kernels::bias_grad_cuda(dy.raw(), dbias.raw(), rows, cols, ctx_.stream()); });
}

void CudaDevice::layer_norm_forward(DevicePtr<const float> x, DevicePtr<const float> weight,
                                    DevicePtr<const float> bias, DevicePtr<float> y,
                                    DevicePtr<float> xhat, DevicePtr<float> rstd, int64_t rows,
                                    int64_t dim, float eps) {
  launch("layer norm", [&] {
    kernels::layer_norm_forward_cuda(x.raw(), weight.raw(), bias.raw(), y.raw(), xhat.raw(),
                                     rstd.raw(), rows, dim, eps, ctx_.stream());
  });
}

void CudaDevice::layer_norm_backward(DevicePtr<const float> dy, DevicePtr<const float> xhat,
                                     DevicePtr<const float> rstd, DevicePtr<const float> weight,
                                     DevicePtr<float> dx, DevicePtr<float> dweight,
                                     DevicePtr<float> dbias, int64_t rows, int64_t dim) {
  launch("layer norm backward", [&] {
    kernels::layer_norm_backward_cuda(dy.raw(), xhat.raw(), rstd.raw(), weight.raw(), dx.raw(),
                                      dweight.raw(), dbias.raw(), rows, dim, ctx_.stream());
  });
}

void CudaDevice::causal_attention_forward(const kernels::AttentionDims& dims,
                                          DevicePtr<const float> qkv, DevicePtr<float> probs,
                                          DevicePtr<float> att) {
  launch("attention", [&] {
    kernels::causal_attention_forward_cuda(dims, qkv.raw(), probs.raw(), att.raw(), ctx_.cublas());
  });
}

void CudaDevice::causal_attention_backward(const kernels::AttentionDims& dims,
                                           DevicePtr<const float> qkv, DevicePtr<const float> probs,
                                           DevicePtr<const float> datt, DevicePtr<float> dqkv,
                                           DevicePtr<float> dscores) {
  launch("attention backward", [&] {
    kernels::causal_attention_backward_cuda(dims, qkv.raw(), probs.raw(), datt.raw(), dqkv.raw(),
                                            dscores.raw(), ctx_.cublas());
  });
}

void CudaDevice::embedding_forward(DevicePtr<const int32_t> ids, DevicePtr<const float> table,
                                   DevicePtr<const float> pos, DevicePtr<float> y, int64_t n,
                                   int64_t steps, int64_t dim) {
  launch("embedding", [&] {
    kernels::embedding_forward_cuda(ids.raw(), table.raw(), pos.raw(), y.raw(), n, steps, dim,
                                    ctx_.stream());
  });
}

void CudaDevice::embedding_backward(DevicePtr<const int32_t> ids, std::span<const int32_t> host_ids,
                                    DevicePtr<const float> dy, DevicePtr<float> dtable,
                                    DevicePtr<float> dpos, int64_t n, int64_t steps, int64_t dim,
                                    int64_t vocab) {
  (void)ids;
  SL_ENFORCE_T(InternalError, static_cast<int64_t>(host_ids.size()) == n,
               "embedding backward: {} host ids for {} rows", host_ids.size(), n);
  // Rows grouped by id on the host (kernels/cpu/embedding.h), so each id's rows add in order.
  const kernels::EmbeddingGradIndexCuda dev =
      upload(kernels::embedding_grad_index(host_ids.data(), n, vocab));
  launch("embedding backward", [&] {
    kernels::embedding_backward_cuda(dev, dy.raw(), dtable.raw(), dpos.raw(), n, steps, dim,
                                     ctx_.stream());
  });
}

void CudaDevice::softmax_xent_forward(DevicePtr<const float> logits,
                                      DevicePtr<const int32_t> targets, DevicePtr<float> probs,
                                      DevicePtr<double> row_loss, DevicePtr<int32_t> row_correct,
                                      int64_t rows, int64_t classes) {
  launch("softmax cross-entropy", [&] {
    kernels::softmax_xent_forward_cuda(logits.raw(), targets.raw(), probs.raw(), row_loss.raw(),
                                       row_correct.raw(), rows, classes, ctx_.stream());
  });
}

void CudaDevice::softmax_xent_backward(DevicePtr<const float> probs,
                                       DevicePtr<const int32_t> targets, DevicePtr<float> dlogits,
                                       int64_t rows, int64_t classes, float scale) {
  launch("softmax cross-entropy backward", [&] {
    kernels::softmax_xent_backward_cuda(probs.raw(), targets.raw(), dlogits.raw(), rows, classes,
                                        scale, ctx_.stream());
  });
}

kernels::EmbeddingGradIndexCuda CudaDevice::upload(const kernels::EmbeddingGradIndex& index) {
  const size_t a = index.order.size(), b = index.seg_start.size(), c = index.seg_id.size();
  auto* base = static_cast<int32_t*>(scratch((a + b + c) * sizeof(int32_t)));
  copy_from_host_bytes(index.order.data(), base, a * sizeof(int32_t));
  copy_from_host_bytes(index.seg_start.data(), base + a, b * sizeof(int32_t));
  copy_from_host_bytes(index.seg_id.data(), base + a + b, c * sizeof(int32_t));
  kernels::EmbeddingGradIndexCuda dev;
  dev.order = base;
  dev.seg_start = base + a;
  dev.seg_id = base + a + b;
  dev.segments = index.segments();
  return dev;
}

void CudaDevice::range_embedding_forward(DevicePtr<const int32_t> ids, DevicePtr<const float> table,
                                         int64_t begin, int64_t end, DevicePtr<float> y, int64_t n,
                                         int64_t dim) {
  launch("range embedding", [&] {
    kernels::range_embedding_forward_cuda(ids.raw(), table.raw(), begin, end, y.raw(), n, dim,
                                          ctx_.stream());
  });
}

void CudaDevice::range_embedding_backward(DevicePtr<const int32_t> ids,
                                          std::span<const int32_t> host_ids,
                                          DevicePtr<const float> dy, int64_t begin, int64_t end,
                                          DevicePtr<float> dtable, DevicePtr<float> dpos, int64_t n,
                                          int64_t steps, int64_t dim) {
  (void)ids;
  SL_ENFORCE_T(InternalError, static_cast<int64_t>(host_ids.size()) == n,
               "range embedding backward: {} host ids for {} rows", host_ids.size(), n);
  // The rows in range grouped by id on the host, so each row's contributions add in order.
  const kernels::EmbeddingGradIndexCuda dev =
      upload(kernels::range_embedding_grad_index(host_ids.data(), n, begin, end));
  launch("range embedding backward", [&] {
    kernels::range_embedding_backward_cuda(dev, dy.raw(), dtable.raw(), dpos.raw(), n, steps, dim,
                                           ctx_.stream());
  });
}

void CudaDevice::vocab_xent_row_max(DevicePtr<const float> logits, DevicePtr<float> row_max,
                                    int64_t rows, int64_t cols) {
  launch("vocab-parallel row max", [&] {
    kernels::vocab_xent_row_max_cuda(logits.raw(), row_max.raw(), rows, cols, ctx_.stream());
  });
}

void CudaDevice::vocab_xent_partials(DevicePtr<const float> logits, DevicePtr<const float> row_max,
                                     DevicePtr<const int32_t> targets, int64_t vocab_begin,
                                     DevicePtr<float> sum_exp, DevicePtr<float> target_logit,
                                     int64_t rows, int64_t cols) {
  launch("vocab-parallel partials", [&] {
    kernels::vocab_xent_partials_cuda(logits.raw(), row_max.raw(), targets.raw(), vocab_begin,
                                      sum_exp.raw(), target_logit.raw(), rows, cols, ctx_.stream());
  });
}

void CudaDevice::vocab_xent_probs(DevicePtr<const float> logits, DevicePtr<const float> row_max,
                                  DevicePtr<const float> sum_exp,
                                  DevicePtr<const float> target_logit, DevicePtr<float> probs,
                                  DevicePtr<double> row_loss, int64_t rows, int64_t cols) {
  launch("vocab-parallel probabilities", [&] {
    kernels::vocab_xent_probs_cuda(logits.raw(), row_max.raw(), sum_exp.raw(), target_logit.raw(),
                                   probs.raw(), row_loss.raw(), rows, cols, ctx_.stream());
  });
}

void CudaDevice::vocab_xent_backward(DevicePtr<const float> probs, DevicePtr<const int32_t> targets,
                                     int64_t vocab_begin, DevicePtr<float> dlogits, int64_t rows,
                                     int64_t cols, float inv_rows) {
  launch("vocab-parallel cross-entropy backward", [&] {
    kernels::vocab_xent_backward_cuda(probs.raw(), targets.raw(), vocab_begin, dlogits.raw(), rows,
                                      cols, inv_rows, ctx_.stream());
  });
}

void CudaDevice::vocab_xent_argmax_neg_id(DevicePtr<const float> logits,
                                          DevicePtr<const float> row_max, int64_t vocab_begin,
                                          DevicePtr<float> neg_best, int64_t rows, int64_t cols) {
  launch("vocab-parallel argmax", [&] {
    kernels::vocab_xent_argmax_neg_id_cuda(logits.raw(), row_max.raw(), vocab_begin, neg_best.raw(),
                                           rows, cols, ctx_.stream());
  });
}

void CudaDevice::sq_norm(DevicePtr<const float> x, int64_t n, DevicePtr<double> out) {
  launch("squared norm", [&] { kernels::sq_norm_cuda(x.raw(), n, out.raw(), ctx_.stream()); });
}

void CudaDevice::scale_cast_to_bf16(DevicePtr<const float> in, DevicePtr<uint16_t> out, int64_t n,
                                    float scale) {
  launch("cast to bf16",
         [&] { kernels::scale_cast_to_bf16_cuda(in.raw(), out.raw(), n, scale, ctx_.stream()); });
}

void CudaDevice::scale_cast_from_bf16(DevicePtr<const uint16_t> in, DevicePtr<float> out, int64_t n,
                                      float scale) {
  launch("cast from bf16",
         [&] { kernels::scale_cast_from_bf16_cuda(in.raw(), out.raw(), n, scale, ctx_.stream()); });
}

void CudaDevice::sgd_update(const kernels::SgdArgs& a) {
  launch("sgd update", [&] { kernels::sgd_update_cuda(a, ctx_.stream()); });
}

void CudaDevice::adam_update(const kernels::AdamArgs& a) {
  launch("adam update", [&] { kernels::adam_update_cuda(a, ctx_.stream()); });
}

void CudaDevice::rmsprop_update(const kernels::RmspropArgs& a) {
  launch("rmsprop update", [&] { kernels::rmsprop_update_cuda(a, ctx_.stream()); });
}

void CudaDevice::adagrad_update(const kernels::AdagradArgs& a) {
  launch("adagrad update", [&] { kernels::adagrad_update_cuda(a, ctx_.stream()); });
}

}  // namespace shardlab
