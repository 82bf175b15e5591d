// The device twins of engine/model's layers, for GpuModel (internal to engine/device, not public
// API). Each runs, in the same order, the kernels/cuda twin of every CPU kernel its engine/model
// layer runs, on the context's stream, over device pointers into the model's flat parameter and
// gradient buffers (bound by the CPU layout's names).
//
// Conventions: forward(x, ...) returns the layer's output, held in a buffer the layer owns (valid
// until its next forward), and keeps a pointer to x (no copy, unlike the CPU layers): the caller
// keeps x unchanged until backward. backward(dy) ADDS the parameter gradients into the bound
// gradients and returns dL/dx, also owned by the layer (valid until its next backward); backward
// changes nothing forward kept, so it may run more than once per forward (gradients add up).
// Activations are ActBuffers (the ledger's activations), grown only, so steady-state steps do not
// allocate. Shapes are checked by GpuModel on the host before any layer runs. Nothing here waits
// for the device (beyond the implicit device synchronisation of cudaFree when a buffer grows).
#pragma once

#include <cstdint>
#include <string>

#include "engine/core/param_layout.h"
#include "engine/device/cuda_context.h"
#include "engine/device/cuda_buffer.h"
#include "kernels/cuda/embedding.h"

namespace shardlab::gpu {

// A layer's activation or scratch buffer: grows only; after a growth the stream is ordered after
// the allocation's zero-fill (CudaContext::order_after_default_stream).
template <class T>
class ActBuffer {
 public:
  T* resize(CudaContext& ctx, int64_t n) {
    const auto want = static_cast<size_t>(n);
    if (want > capacity_) {
      capacity_ = 0;  // stays 0 if the growth throws (the old storage is gone by then)
      buf_.resize(want);
      capacity_ = want;
      ctx.order_after_default_stream();
    }
    return buf_.data();
  }
  T* data() { return buf_.data(); }
  const T* data() const { return buf_.data(); }

 private:
  CudaBuffer<T> buf_;  // MemCategory::activations
  size_t capacity_ = 0;
};

// Where the layers find their parameters: the model's layout and its flat device buffers.
struct GpuBinding {
  const ParamLayout* layout = nullptr;
  float* params = nullptr;
  float* grads = nullptr;
  // The parameter `name` and its gradient; InternalError unless it holds `numel` elements
  // (InvalidArgument from the layout when absent).
  float* param(const std::string& name, int64_t numel) const;
  float* grad(const std::string& name, int64_t numel) const;
  // Elements handed out by param() so far: GpuModel checks that its layers use the whole layout.
  mutable int64_t bound = 0;
};

// engine/model/linear.h: y = x W^T + b, W [out, in].
class GpuLinear {
 public:
  GpuLinear(CudaContext& ctx, int64_t in, int64_t out, bool bias = true);
  // prefix + "weight" and, with bias, prefix + "bias".
  void bind(const GpuBinding& b, const std::string& prefix);
  const float* forward(const float* x, int64_t rows);
  // need_dx false skips dx = dy W and returns null (the model's first layer: its input is data,
  // whose gradient the CPU model computes and drops).
  const float* backward(const float* dy, bool need_dx = true);
  // The last forward's output (still valid during backward: backward does not touch it).
  const float* forward_output() const { return y_.data(); }
  // The bias gradient (null without bias), for the attention's key-bias rule.
  float* bias_grad() const { return db_; }
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

 private:
  CudaContext* ctx_;
  int64_t in_, out_;
  bool bias_;
  const float* w_ = nullptr;
  float* dw_ = nullptr;
  const float* b_ = nullptr;
  float* db_ = nullptr;
  const float* x_ = nullptr;
  int64_t rows_ = 0;
  ActBuffer<float> y_, dx_;
};

// engine/model/activations.h: ReLU (keeps its output) and GELU (keeps its input and the tanh).
class GpuActivation {
 public:
  // "relu" or "gelu" (InvalidArgument otherwise, as make_activation).
  GpuActivation(CudaContext& ctx, const std::string& kind);
  const float* forward(const float* x, int64_t n);
  const float* backward(const float* dy);

 private:
  CudaContext* ctx_;
  bool gelu_;
  const float* x_ = nullptr;
  int64_t n_ = 0;
  ActBuffer<float> y_, tanh_, dx_;
};

// engine/model/layer_norm.h over the last dimension, eps 1e-5.
class GpuLayerNorm {
 public:
  GpuLayerNorm(CudaContext& ctx, int64_t dim, float eps = 1e-5f);
  void bind(const GpuBinding& b, const std::string& prefix);
  const float* forward(const float* x, int64_t rows);
  const float* backward(const float* dy);

 private:
  CudaContext* ctx_;
  int64_t dim_;
  float eps_;
  const float* w_ = nullptr;
  float* dw_ = nullptr;
  const float* b_ = nullptr;
  float* db_ = nullptr;
  int64_t rows_ = 0;
  ActBuffer<float> y_, xhat_, rstd_, dx_;
};

// engine/model/attention.h: fused qkv Linear, causal attention, proj Linear; the key part
// [C, 2C) of the qkv bias gradient is kept bit for bit across the qkv Linear's backward
// (KeyBiasGradKeeper in engine/model/attention_core.h).
class GpuCausalSelfAttention {
 public:
  GpuCausalSelfAttention(CudaContext& ctx, int64_t width, int64_t heads, int64_t context);
  // prefix + "qkv.*" and prefix + "proj.*".
  void bind(const GpuBinding& b, const std::string& prefix);
  // x [batch, steps, width].
  const float* forward(const float* x, int64_t batch, int64_t steps);
  const float* backward(const float* dy);

 private:
  CudaContext* ctx_;
  int64_t width_, heads_, context_, head_dim_;
  GpuLinear qkv_, proj_;
  int64_t batch_ = 0, steps_ = 0;
  ActBuffer<float> probs_, att_, dqkv_, dscores_, key_bias_saved_;
};

// engine/model/transformer_block.h: h = x + attn(ln1(x)), y = h + proj(gelu(fc(ln2(h)))).
class GpuTransformerBlock {
 public:
  GpuTransformerBlock(CudaContext& ctx, int64_t width, int64_t heads, int64_t context,
                      int64_t mlp_ratio);
  // prefix + "ln1.*", "attn.*", "ln2.*", "mlp.fc.*", "mlp.proj.*".
  void bind(const GpuBinding& b, const std::string& prefix);
  const float* forward(const float* x, int64_t batch, int64_t steps);
  const float* backward(const float* dy);

 private:
  CudaContext* ctx_;
  int64_t width_;
  GpuLayerNorm ln1_;
  GpuCausalSelfAttention attn_;
  GpuLayerNorm ln2_;
  GpuLinear fc_;
  GpuActivation act_;
  GpuLinear proj_;
  int64_t n_ = 0;  // batch * steps * width
  ActBuffer<float> h_, y_, dh_, dx_;
};

// engine/model/embedding.h TokenPositionEmbedding: y[b, t] = tok[id] + pos[t].
class GpuTokenPositionEmbedding {
 public:
  GpuTokenPositionEmbedding(CudaContext& ctx, int64_t vocab, int64_t context, int64_t dim);
  // prefix + "tok.weight" and prefix + "pos.weight".
  void bind(const GpuBinding& b, const std::string& prefix);
  // ids: batch * steps device int32s, checked on the host (checked_token_id).
  const float* forward(const int32_t* ids, int64_t batch, int64_t steps);
  // index: the device copy of the batch's EmbeddingGradIndex (kernels/cpu/embedding.h). The
  // input (token ids) has no gradient, so nothing is returned.
  void backward(const float* dy, const kernels::EmbeddingGradIndexCuda& index);

 private:
  CudaContext* ctx_;
  int64_t vocab_, context_, dim_;
  const float* tok_ = nullptr;
  float* dtok_ = nullptr;
  const float* pos_ = nullptr;
  float* dpos_ = nullptr;
  int64_t batch_ = 0, steps_ = 0;
  ActBuffer<float> y_;
};

// engine/model/gpt.h's last block: LayerNorm "ln_f" and the bias-free Linear "head".
class GpuGptHead {
 public:
  GpuGptHead(CudaContext& ctx, int64_t width, int64_t vocab);
  void bind(const GpuBinding& b, const std::string& prefix);
  const float* forward(const float* x, int64_t rows);
  const float* backward(const float* dy);

 private:
  GpuLayerNorm ln_f_;
  GpuLinear head_;
};

// engine/model/mlp.h's blocks: Linear "fc" + activation "act", or the output Linear "out".
class GpuMlpBlock {
 public:
  // activation empty: the output block ("out", no activation).
  GpuMlpBlock(CudaContext& ctx, int64_t in, int64_t out, const std::string& activation);
  void bind(const GpuBinding& b, const std::string& prefix);
  const float* forward(const float* x, int64_t rows);
  const float* backward(const float* dy, bool need_dx = true);

 private:
  GpuLinear linear_;
  bool has_act_;
  GpuActivation act_;
};

}  // namespace shardlab::gpu
