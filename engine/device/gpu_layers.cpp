#include "engine/device/gpu_layers.h"

#include "engine/core/error.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/layer_norm.h"

namespace shardlab::gpu {

using kernels::gemm_cuda;
using kernels::Trans;

float* GpuBinding::param(const std::string& name, int64_t numel) const {
  const ParamInfo& p = (*layout)[layout->index_of(name)];
  SL_ENFORCE_T(InternalError, p.numel == numel,
               "GpuModel: parameter {} holds {} elements, the GPU layer expects {}", name, p.numel,
               numel);
  bound += numel;
  return params + p.offset;
}

float* GpuBinding::grad(const std::string& name, int64_t numel) const {
  const ParamInfo& p = (*layout)[layout->index_of(name)];
  SL_ENFORCE_T(InternalError, p.numel == numel,
               "GpuModel: parameter {} holds {} elements, the GPU layer expects {}", name, p.numel,
               numel);
  return grads + p.offset;
}

// ---- Linear (engine/model/linear.cpp) ----------------------------------------------------------

GpuLinear::GpuLinear(CudaContext& ctx, int64_t in, int64_t out, bool bias)
    : ctx_(&ctx), in_(in), out_(out), bias_(bias) {
  SL_ENFORCE(in > 0 && out > 0, "Linear: sizes must be > 0, got in={} out={}", in, out);
}

void GpuLinear::bind(const GpuBinding& b, const std::string& prefix) {
  w_ = b.param(prefix + "weight", out_ * in_);
  dw_ = b.grad(prefix + "weight", out_ * in_);
  if (bias_) {
    b_ = b.param(prefix + "bias", out_);
    db_ = b.grad(prefix + "bias", out_);
  }
}

const float* GpuLinear::forward(const float* x, int64_t rows) {
  SL_ENFORCE_T(InternalError, w_ != nullptr, "GpuLinear: forward before bind");
  x_ = x;
  rows_ = rows;
  float* y = y_.resize(*ctx_, rows * out_);
  if (rows == 0) return y;
  // y = x W^T, then + b: one GEMM, then the bias as the CPU layer adds it.
  gemm_cuda(ctx_->cublas(), Trans::No, Trans::Yes, rows, out_, in_, 1.0f, x, in_, w_, in_, 0.0f, y,
            out_);
  if (bias_) kernels::bias_add_cuda(y, b_, rows, out_, ctx_->stream());
  return y;
}

const float* GpuLinear::backward(const float* dy, bool need_dx) {
  SL_ENFORCE_T(InternalError, x_ != nullptr, "GpuLinear: backward before forward");
  float* dx = need_dx ? dx_.resize(*ctx_, rows_ * in_) : nullptr;
  if (rows_ == 0) return dx;
  // dW += dy^T x   ([out, rows] x [rows, in]), beta 1: gradients accumulate.
  gemm_cuda(ctx_->cublas(), Trans::Yes, Trans::No, out_, in_, rows_, 1.0f, dy, out_, x_, in_, 1.0f,
            dw_, in_);
  if (bias_) kernels::bias_grad_cuda(dy, db_, rows_, out_, ctx_->stream());
  // dx = dy W   ([rows, out] x [out, in])
  if (need_dx)
    gemm_cuda(ctx_->cublas(), Trans::No, Trans::No, rows_, in_, out_, 1.0f, dy, out_, w_, in_, 0.0f,
              dx, in_);
  return dx;
}

// ---- ReLU / GELU (engine/model/activations.cpp) ------------------------------------------------

GpuActivation::GpuActivation(CudaContext& ctx, const std::string& kind) : ctx_(&ctx) {
  SL_ENFORCE(kind == "relu" || kind == "gelu",
             "activation: unknown activation '{}' (expected relu or gelu)", kind);
  gelu_ = kind == "gelu";
}

const float* GpuActivation::forward(const float* x, int64_t n) {
  x_ = x;
  n_ = n;
  float* y = y_.resize(*ctx_, n);
  if (n == 0) return y;
  if (gelu_) {
    // The tanh is kept for backward, as the CPU Gelu keeps it.
    kernels::gelu_forward_cuda(x, y, tanh_.resize(*ctx_, n), n, ctx_->stream());
  } else {
    kernels::relu_forward_cuda(x, y, n, ctx_->stream());
  }
  return y;
}

const float* GpuActivation::backward(const float* dy) {
  SL_ENFORCE_T(InternalError, x_ != nullptr, "GpuActivation: backward before forward");
  float* dx = dx_.resize(*ctx_, n_);
  if (n_ == 0) return dx;
  if (gelu_) {
    kernels::gelu_backward_cuda(x_, tanh_.data(), dy, dx, n_, ctx_->stream());
  } else {
    // The mask is the forward's output, as the CPU Relu keeps it.
    kernels::relu_backward_cuda(y_.data(), dy, dx, n_, ctx_->stream());
  }
  return dx;
}

// ---- LayerNorm (engine/model/layer_norm.cpp) ---------------------------------------------------

GpuLayerNorm::GpuLayerNorm(CudaContext& ctx, int64_t dim, float eps)
    : ctx_(&ctx), dim_(dim), eps_(eps) {
  SL_ENFORCE(dim > 0, "LayerNorm: dim must be > 0, got {}", dim);
  SL_ENFORCE(eps > 0.0f, "LayerNorm: eps must be > 0, got {}", eps);
}

void GpuLayerNorm::bind(const GpuBinding& b, const std::string& prefix) {
  w_ = b.param(prefix + "weight", dim_);
  dw_ = b.grad(prefix + "weight", dim_);
  b_ = b.param(prefix + "bias", dim_);
  db_ = b.grad(prefix + "bias", dim_);
}

const float* GpuLayerNorm::forward(const float* x, int64_t rows) {
  SL_ENFORCE_T(InternalError, w_ != nullptr, "GpuLayerNorm: forward before bind");
  rows_ = rows;
  float* y = y_.resize(*ctx_, rows * dim_);
  float* xhat = xhat_.resize(*ctx_, rows * dim_);
  float* rstd = rstd_.resize(*ctx_, rows);
  if (rows == 0) return y;
  kernels::layer_norm_forward_cuda(x, w_, b_, y, xhat, rstd, rows, dim_, eps_, ctx_->stream());
  return y;
}

const float* GpuLayerNorm::backward(const float* dy) {
  float* dx = dx_.resize(*ctx_, rows_ * dim_);
  if (rows_ == 0) return dx;
  kernels::layer_norm_backward_cuda(dy, xhat_.data(), rstd_.data(), w_, dx, dw_, db_, rows_, dim_,
                                    ctx_->stream());
  return dx;
}

// ---- CausalSelfAttention (engine/model/attention.cpp, attention_core.cpp) ----------------------

GpuCausalSelfAttention::GpuCausalSelfAttention(CudaContext& ctx, int64_t width, int64_t heads,
                                               int64_t context)
    : ctx_(&ctx),
      width_(width),
      heads_(heads),
      context_(context),
      head_dim_(heads > 0 ? width / heads : 0),
      qkv_(ctx, width, 3 * width),
      proj_(ctx, width, width) {
  SL_ENFORCE(heads > 0 && width % heads == 0,
             "CausalSelfAttention: {} heads do not divide width {}", heads, width);
  SL_ENFORCE(context > 0, "CausalSelfAttention: context must be > 0, got {}", context);
}

void GpuCausalSelfAttention::bind(const GpuBinding& b, const std::string& prefix) {
  qkv_.bind(b, prefix + "qkv.");
  proj_.bind(b, prefix + "proj.");
}

const float* GpuCausalSelfAttention::forward(const float* x, int64_t batch, int64_t steps) {
  SL_ENFORCE(steps <= context_, "CausalSelfAttention: sequence length {} exceeds context {}", steps,
             context_);
  batch_ = batch;
  steps_ = steps;
  const float* qkv = qkv_.forward(x, batch * steps);
  float* probs = probs_.resize(*ctx_, batch * heads_ * steps * steps);
  float* att = att_.resize(*ctx_, batch * steps * width_);
  if (batch * steps > 0)
    kernels::causal_attention_forward_cuda({batch, steps, heads_, head_dim_}, qkv, probs, att,
                                           ctx_->cublas());
  return proj_.forward(att, batch * steps);
}

const float* GpuCausalSelfAttention::backward(const float* dy) {
  const int64_t rows = batch_ * steps_;
  const float* datt = proj_.backward(dy);
  float* dqkv = dqkv_.resize(*ctx_, rows * 3 * width_);
  // The CUDA backward takes a whole batch row's heads of score scratch at once (the CPU T*T).
  float* dscores = dscores_.resize(*ctx_, heads_ * steps_ * steps_);
  // qkv_'s forward output is still its y (a Linear's backward does not touch it).
  const float* qkv = qkv_.forward_output();
  if (rows > 0)
    kernels::causal_attention_backward_cuda({batch_, steps_, heads_, head_dim_}, qkv, probs_.data(),
                                            datt, dqkv, dscores, ctx_->cublas());
  // KeyBiasGradKeeper: the key part [C, 2C) of qkv.bias's gradient is exactly zero in theory;
  // keep the accumulated value bit for bit instead of adding the sum's rounding noise.
  float* key_grad = qkv_.bias_grad() + width_;
  float* saved = key_bias_saved_.resize(*ctx_, width_);
  const auto bytes = static_cast<size_t>(width_) * sizeof(float);
  SL_CUDA_CHECK(cudaMemcpyAsync(saved, key_grad, bytes, cudaMemcpyDeviceToDevice, ctx_->stream()),
                "saving the key-bias gradient");
  const float* dx = qkv_.backward(dqkv);
  SL_CUDA_CHECK(cudaMemcpyAsync(key_grad, saved, bytes, cudaMemcpyDeviceToDevice, ctx_->stream()),
                "restoring the key-bias gradient");
  return dx;
}

// ---- TransformerBlock (engine/model/transformer_block.cpp) -------------------------------------

GpuTransformerBlock::GpuTransformerBlock(CudaContext& ctx, int64_t width, int64_t heads,
                                         int64_t context, int64_t mlp_ratio)
    : ctx_(&ctx),
      width_(width),
      ln1_(ctx, width),
      attn_(ctx, width, heads, context),
      ln2_(ctx, width),
      fc_(ctx, width, mlp_ratio * width),
      act_(ctx, "gelu"),
      proj_(ctx, mlp_ratio * width, width) {}

void GpuTransformerBlock::bind(const GpuBinding& b, const std::string& prefix) {
  ln1_.bind(b, prefix + "ln1.");
  attn_.bind(b, prefix + "attn.");
  ln2_.bind(b, prefix + "ln2.");
  fc_.bind(b, prefix + "mlp.fc.");
  proj_.bind(b, prefix + "mlp.proj.");
}

const float* GpuTransformerBlock::forward(const float* x, int64_t batch, int64_t steps) {
  const int64_t rows = batch * steps;
  n_ = rows * width_;
  cudaStream_t s = ctx_->stream();
  // h = x + attn(ln1(x))
  const float* n1 = ln1_.forward(x, rows);
  const float* a = attn_.forward(n1, batch, steps);
  float* h = h_.resize(*ctx_, n_);
  if (n_ > 0) kernels::add_cuda(x, a, h, n_, s);
  // y = h + proj(gelu(fc(ln2(h))))
  const float* n2 = ln2_.forward(h, rows);
  const float* f = fc_.forward(n2, rows);
  const float* g = act_.forward(f, rows * fc_.out_features());
  const float* m = proj_.forward(g, rows);
  float* y = y_.resize(*ctx_, n_);
  if (n_ > 0) kernels::add_cuda(h, m, y, n_, s);
  return y;
}

const float* GpuTransformerBlock::backward(const float* dy) {
  cudaStream_t s = ctx_->stream();
  // y = h + mlp(ln2(h)): dL/dh = dy + (the MLP branch's gradient).
  const float* dbranch = fc_.backward(act_.backward(proj_.backward(dy)));
  const float* dn = ln2_.backward(dbranch);
  float* dh = dh_.resize(*ctx_, n_);
  if (n_ > 0) kernels::add_cuda(dy, dn, dh, n_, s);
  // h = x + attn(ln1(x)): dL/dx = dh + (the attention branch's gradient).
  dbranch = attn_.backward(dh);
  dn = ln1_.backward(dbranch);
  float* dx = dx_.resize(*ctx_, n_);
  if (n_ > 0) kernels::add_cuda(dh, dn, dx, n_, s);
  return dx;
}

// ---- TokenPositionEmbedding (engine/model/embedding.cpp) ---------------------------------------

GpuTokenPositionEmbedding::GpuTokenPositionEmbedding(CudaContext& ctx, int64_t vocab,
                                                     int64_t context, int64_t dim)
    : ctx_(&ctx), vocab_(vocab), context_(context), dim_(dim) {
  SL_ENFORCE(vocab > 0 && dim > 0, "Embedding: sizes must be > 0, got num={} dim={}", vocab, dim);
  SL_ENFORCE(context > 0, "TokenPositionEmbedding: context must be > 0, got {}", context);
}

void GpuTokenPositionEmbedding::bind(const GpuBinding& b, const std::string& prefix) {
  tok_ = b.param(prefix + "tok.weight", vocab_ * dim_);
  dtok_ = b.grad(prefix + "tok.weight", vocab_ * dim_);
  pos_ = b.param(prefix + "pos.weight", context_ * dim_);
  dpos_ = b.grad(prefix + "pos.weight", context_ * dim_);
}

const float* GpuTokenPositionEmbedding::forward(const int32_t* ids, int64_t batch, int64_t steps) {
  SL_ENFORCE_T(InternalError, tok_ != nullptr, "GpuTokenPositionEmbedding: forward before bind");
  SL_ENFORCE(steps <= context_, "TokenPositionEmbedding: sequence length {} exceeds context {}",
             steps, context_);
  batch_ = batch;
  steps_ = steps;
  const int64_t n = batch * steps;
  float* y = y_.resize(*ctx_, n * dim_);
  if (n > 0) kernels::embedding_forward_cuda(ids, tok_, pos_, y, n, steps, dim_, ctx_->stream());
  return y;
}

void GpuTokenPositionEmbedding::backward(const float* dy,
                                         const kernels::EmbeddingGradIndexCuda& index) {
  const int64_t n = batch_ * steps_;
  if (n == 0) return;
  kernels::embedding_backward_cuda(index, dy, dtok_, dpos_, n, steps_, dim_, ctx_->stream());
}

// ---- GPT head (engine/model/gpt.cpp) and MLP blocks (engine/model/mlp.cpp) ---------------------

GpuGptHead::GpuGptHead(CudaContext& ctx, int64_t width, int64_t vocab)
    : ln_f_(ctx, width), head_(ctx, width, vocab, /*bias=*/false) {}

void GpuGptHead::bind(const GpuBinding& b, const std::string& prefix) {
  ln_f_.bind(b, prefix + "ln_f.");
  head_.bind(b, prefix + "head.");
}

const float* GpuGptHead::forward(const float* x, int64_t rows) {
  return head_.forward(ln_f_.forward(x, rows), rows);
}

const float* GpuGptHead::backward(const float* dy) {
  return ln_f_.backward(head_.backward(dy));
}

GpuMlpBlock::GpuMlpBlock(CudaContext& ctx, int64_t in, int64_t out, const std::string& activation)
    : linear_(ctx, in, out),
      has_act_(!activation.empty()),
      act_(ctx, activation.empty() ? "relu" : activation) {}

void GpuMlpBlock::bind(const GpuBinding& b, const std::string& prefix) {
  linear_.bind(b, prefix + (has_act_ ? "fc." : "out."));
}

const float* GpuMlpBlock::forward(const float* x, int64_t rows) {
  const float* y = linear_.forward(x, rows);
  return has_act_ ? act_.forward(y, rows * linear_.out_features()) : y;
}

const float* GpuMlpBlock::backward(const float* dy, bool need_dx) {
  return linear_.backward(has_act_ ? act_.backward(dy) : dy, need_dx);
}

}  // namespace shardlab::gpu
