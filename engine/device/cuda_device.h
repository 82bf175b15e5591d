// CudaDevice: one GPU as a rank's Device. Its kernels are kernels/cuda, on the context's stream
// and cuBLAS handle (CudaContext); its memory comes from the device's stream-ordered pool
// (cudaMallocAsync, zero-filled on the stream; cudaFreeAsync, so a free is ordered after the
// kernels that still read, and steady-state steps reuse pooled memory instead of calling
// cudaMalloc/cudaFree, whose free synchronises the device). Copies to and from the host wait on
// the stream, bounded (CudaContext::sync).
//
// Built with the CUDA kernels only (SHARDLAB_HAVE_CUDA_KERNELS); make_device says why otherwise.
#pragma once

#include <vector>

#include "engine/device/cuda_context.h"
#include "engine/device/device.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cuda/embedding.h"

namespace shardlab {

class CudaDevice final : public Device {
 public:
  // Makes options.index current on the calling thread (DeviceError when it cannot be used).
  explicit CudaDevice(const DeviceOptions& options = {});
  ~CudaDevice() override;

  DeviceKind kind() const override { return DeviceKind::cuda; }
  std::string describe() const override { return ctx_.describe(); }
  void* allocate(size_t bytes, const char* what) override;
  void deallocate(void* p, size_t bytes) noexcept override;
  void synchronize(const char* what) override { ctx_.sync(what, timeout_s_); }
  CudaContext& context() { return ctx_; }
  void* native_stream() const override { return ctx_.stream(); }

  void fill(DevicePtr<float> x, int64_t n, float value) override;
  void gemm(kernels::Trans ta, kernels::Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
            DevicePtr<const float> a, int64_t lda, DevicePtr<const float> b, int64_t ldb,
            float beta, DevicePtr<float> c, int64_t ldc) override;
  void relu_forward(DevicePtr<const float> x, DevicePtr<float> y, int64_t n) override;
  void relu_backward(DevicePtr<const float> y, DevicePtr<const float> dy, DevicePtr<float> dx,
                     int64_t n) override;
  void gelu_forward(DevicePtr<const float> x, DevicePtr<float> y, DevicePtr<float> tanh_out,
                    int64_t n) override;
  void gelu_backward(DevicePtr<const float> x, DevicePtr<const float> tanh_in,
                     DevicePtr<const float> dy, DevicePtr<float> dx, int64_t n) override;
  void add(DevicePtr<const float> a, DevicePtr<const float> b, DevicePtr<float> out,
           int64_t n) override;
  void scale(DevicePtr<float> x, int64_t n, float s) override;
  void bias_add(DevicePtr<float> y, DevicePtr<const float> bias, int64_t rows,
                int64_t cols) override;
  void bias_grad(DevicePtr<const float> dy, DevicePtr<float> dbias, int64_t rows,
                 int64_t cols) override;
  void layer_norm_forward(DevicePtr<const float> x, DevicePtr<const float> weight,
                          DevicePtr<const float> bias, DevicePtr<float> y, DevicePtr<float> xhat,
                          DevicePtr<float> rstd, int64_t rows, int64_t dim, float eps) override;
  void layer_norm_backward(DevicePtr<const float> dy, DevicePtr<const float> xhat,
                           DevicePtr<const float> rstd, DevicePtr<const float> weight,
                           DevicePtr<float> dx, DevicePtr<float> dweight, DevicePtr<float> dbias,
                           int64_t rows, int64_t dim) override;
  void causal_attention_forward(const kernels::AttentionDims& dims, DevicePtr<const float> qkv,
                                DevicePtr<float> probs, DevicePtr<float> att) override;
  void causal_attention_backward(const kernels::AttentionDims& dims, DevicePtr<const float> qkv,
                                 DevicePtr<const float> probs, DevicePtr<const float> datt,
                                 DevicePtr<float> dqkv, DevicePtr<float> dscores) override;
  void embedding_forward(DevicePtr<const int32_t> ids, DevicePtr<const float> table,
                         DevicePtr<const float> pos, DevicePtr<float> y, int64_t n, int64_t steps,
                         int64_t dim) override;
  void embedding_backward(DevicePtr<const int32_t> ids, std::span<const int32_t> host_ids,
                          DevicePtr<const float> dy, DevicePtr<float> dtable, DevicePtr<float> dpos,
                          int64_t n, int64_t steps, int64_t dim, int64_t vocab) override;
  void softmax_xent_forward(DevicePtr<const float> logits, DevicePtr<const int32_t> targets,
                            DevicePtr<float> probs, DevicePtr<double> row_loss,
                            DevicePtr<int32_t> row_correct, int64_t rows, int64_t classes) override;
  void softmax_xent_backward(DevicePtr<const float> probs, DevicePtr<const int32_t> targets,
                             DevicePtr<float> dlogits, int64_t rows, int64_t classes,
                             float scale) override;
  void range_embedding_forward(DevicePtr<const int32_t> ids, DevicePtr<const float> table,
                               int64_t begin, int64_t end, DevicePtr<float> y, int64_t n,
                               int64_t dim) override;
  void range_embedding_backward(DevicePtr<const int32_t> ids, std::span<const int32_t> host_ids,
                                DevicePtr<const float> dy, int64_t begin, int64_t end,
                                DevicePtr<float> dtable, DevicePtr<float> dpos, int64_t n,
                                int64_t steps, int64_t dim) override;
  void vocab_xent_row_max(DevicePtr<const float> logits, DevicePtr<float> row_max, int64_t rows,
                          int64_t cols) override;
  void vocab_xent_partials(DevicePtr<const float> logits, DevicePtr<const float> row_max,
                           DevicePtr<const int32_t> targets, int64_t vocab_begin,
                           DevicePtr<float> sum_exp, DevicePtr<float> target_logit, int64_t rows,
                           int64_t cols) override;
  void vocab_xent_probs(DevicePtr<const float> logits, DevicePtr<const float> row_max,
                        DevicePtr<const float> sum_exp, DevicePtr<const float> target_logit,
                        DevicePtr<float> probs, DevicePtr<double> row_loss, int64_t rows,
                        int64_t cols) override;
  void vocab_xent_backward(DevicePtr<const float> probs, DevicePtr<const int32_t> targets,
                           int64_t vocab_begin, DevicePtr<float> dlogits, int64_t rows,
                           int64_t cols, float inv_rows) override;
  void vocab_xent_argmax_neg_id(DevicePtr<const float> logits, DevicePtr<const float> row_max,
                                int64_t vocab_begin, DevicePtr<float> neg_best, int64_t rows,
                                int64_t cols) override;
  void sq_norm(DevicePtr<const float> x, int64_t n, DevicePtr<double> out) override;
  void scale_cast_to_bf16(DevicePtr<const float> in, DevicePtr<uint16_t> out, int64_t n,
                          float scale) override;
  void scale_cast_from_bf16(DevicePtr<const uint16_t> in, DevicePtr<float> out, int64_t n,
                            float scale) override;
  void sgd_update(const kernels::SgdArgs& a) override;
  void adam_update(const kernels::AdamArgs& a) override;
  void rmsprop_update(const kernels::RmspropArgs& a) override;
  void adagrad_update(const kernels::AdagradArgs& a) override;

 protected:
  void copy_to_host_bytes(const void* src, void* dst, size_t bytes) override;
  void copy_from_host_bytes(const void* src, void* dst, size_t bytes) override;
  void copy_bytes(const void* src, void* dst, size_t bytes) override;

 private:
  // Device scratch of `bytes`, grown only, for the embedding's segment index.
  void* scratch(size_t bytes);
  // The index's three arrays copied into scratch, as the CUDA scatter-add takes them.
  kernels::EmbeddingGradIndexCuda upload(const kernels::EmbeddingGradIndex& index);

  CudaContext ctx_;
  double timeout_s_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
};

}  // namespace shardlab
