#include "engine/device/gpu_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "engine/core/error.h"
#include "engine/device/cuda_buffer.h"
#include "engine/device/gpu_layers.h"
#include "engine/device/pinned_buffer.h"
#include "engine/model/embedding.h"
#include "engine/model/model.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/softmax_xent.h"

namespace shardlab {
namespace {

// Host transfers go through page-locked staging: a cudaMemcpyAsync from pageable memory
// synchronises the stream first, and one to pageable memory returns only when the copy is done,
// both unbounded waits. Large transfers (parameters) go in chunks of this size.
constexpr size_t kStagingChunk = size_t{16} << 20;

}  // namespace

struct GpuModel::Impl {
  ModelConfig config;
  CudaContext* ctx = nullptr;
  std::unique_ptr<Model> cpu_layout;  // ModelStorage::external: the layout, no buffers
  int64_t n = 0;
  CudaBuffer<float> params, grads;
  bool gpt = false;

  std::vector<std::unique_ptr<gpu::GpuMlpBlock>> mlp;
  std::unique_ptr<gpu::GpuTokenPositionEmbedding> embed;
  std::vector<std::unique_ptr<gpu::GpuTransformerBlock>> blocks;
  std::unique_ptr<gpu::GpuGptHead> head;

  // The batch on the device. ints: the MLP's targets, or the GPT's ids | targets | the embedding
  // gradient index (order | seg_start | seg_id), uploaded in one copy.
  gpu::ActBuffer<float> input;
  gpu::ActBuffer<int32_t> ints;
  const int32_t* targets = nullptr;
  kernels::EmbeddingGradIndexCuda index;
  gpu::ActBuffer<float> probs, dlogits;
  gpu::ActBuffer<double> row_loss;
  gpu::ActBuffer<int32_t> row_correct;
  int64_t rows = 0, classes = 0, batch = 0, steps = 0;
  bool have_forward = false;

  // Upload staging: `up_pending` while a copy from it may still be queued (the next writer waits
  // for it first, bounded). Download staging: every download waits for its copy before returning.
  PinnedBuffer<char> up, down;
  bool up_pending = false;

  char* upload_staging(size_t bytes) {
    if (up_pending) {
      ctx->sync("GpuModel: waiting for an earlier upload");
      up_pending = false;
    }
    return up.reserve(bytes);
  }

  void upload(void* dst, const void* src, size_t bytes) {
    for (size_t done = 0; done < bytes;) {
      const size_t len = std::min(kStagingChunk, bytes - done);
      char* stage = upload_staging(len);
      std::memcpy(stage, static_cast<const char*>(src) + done, len);
      SL_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + done, stage, len,
                                    cudaMemcpyHostToDevice, ctx->stream()),
                    "GpuModel: upload");
      up_pending = true;
      done += len;
    }
  }

  // Small transfers (a batch) packed into one staging buffer, one copy each.
  struct Piece {
    void* dst;
    const void* src;
    size_t bytes;
  };
  void upload_packed(std::initializer_list<Piece> pieces) {
    size_t total = 0;
    for (const Piece& p : pieces) total += p.bytes;
    if (total == 0) return;
    char* stage = upload_staging(total);
    size_t off = 0;
    for (const Piece& p : pieces) {
      if (p.bytes == 0) continue;
      std::memcpy(stage + off, p.src, p.bytes);
      SL_CUDA_CHECK(
          cudaMemcpyAsync(p.dst, stage + off, p.bytes, cudaMemcpyHostToDevice, ctx->stream()),
          "GpuModel: batch upload");
      off += p.bytes;
    }
    up_pending = true;
  }

  void download(void* dst, const void* src, size_t bytes, const char* what) {
    for (size_t done = 0; done < bytes;) {
      const size_t len = std::min(kStagingChunk, bytes - done);
      char* stage = down.reserve(len);
      SL_CUDA_CHECK(cudaMemcpyAsync(stage, static_cast<const char*>(src) + done, len,
                                    cudaMemcpyDeviceToHost, ctx->stream()),
                    what);
      ctx->sync(what);
      std::memcpy(static_cast<char*>(dst) + done, stage, len);
      done += len;
    }
    up_pending = false;  // the stream has drained
  }

  void build_layers() {
    const gpu::GpuBinding binding{&cpu_layout->layout(), params.data(), grads.data()};
    if (!gpt) {
      const MlpConfig& m = config.mlp;
      int64_t prev = m.input_dim;
      int b = 0;
      for (const int64_t width : m.hidden) {
        mlp.push_back(std::make_unique<gpu::GpuMlpBlock>(*ctx, prev, width, m.activation));
        mlp.back()->bind(binding, fmt::format("blocks.{}.", b++));
        prev = width;
      }
      mlp.push_back(std::make_unique<gpu::GpuMlpBlock>(*ctx, prev, m.num_classes, ""));
      mlp.back()->bind(binding, fmt::format("blocks.{}.", b));
      check_bound(binding);
      return;
    }
    const GptConfig& g = config.gpt;
    embed =
        std::make_unique<gpu::GpuTokenPositionEmbedding>(*ctx, g.vocab_size, g.context, g.width);
    embed->bind(binding, "blocks.0.");
    for (int64_t l = 0; l < g.layers; ++l) {
      blocks.push_back(std::make_unique<gpu::GpuTransformerBlock>(*ctx, g.width, g.heads, g.context,
                                                                  g.mlp_ratio));
      blocks.back()->bind(binding, fmt::format("blocks.{}.", l + 1));
    }
    head = std::make_unique<gpu::GpuGptHead>(*ctx, g.width, g.vocab_size);
    head->bind(binding, fmt::format("blocks.{}.", g.layers + 1));
    check_bound(binding);
  }

  // Every parameter of the CPU layout has a GPU layer (names are unique, so the count suffices).
  void check_bound(const gpu::GpuBinding& binding) const {
    SL_ENFORCE_T(InternalError, binding.bound == n,
                 "GpuModel: the GPU layers use {} of the {} model's {} parameters", binding.bound,
                 config.kind, n);
  }

  // Host checks with the CPU layers' messages, then the upload. Nothing reaches the device
  // before every check has passed.
  void upload_batch(const Batch& b) {
    const Tensor& x = b.input;
    std::vector<int32_t> host_ints;
    if (!gpt) {
      const int64_t in = config.mlp.input_dim;
      SL_ENFORCE(x.rank() >= 1 && x.dim(-1) == in,
                 "Linear: expected last dimension {}, got shape {}", in, to_string(x.shape()));
      rows = x.numel() / in;
      classes = config.mlp.num_classes;
    } else {
      const GptConfig& g = config.gpt;
      SL_ENFORCE(x.rank() == 2, "TokenPositionEmbedding: expected token ids [B, T], got shape {}",
                 to_string(x.shape()));
      SL_ENFORCE(x.dim(1) <= g.context,
                 "TokenPositionEmbedding: sequence length {} exceeds context {}", x.dim(1),
                 g.context);
      batch = x.dim(0);
      steps = x.dim(1);
      rows = batch * steps;
      classes = g.vocab_size;
      host_ints.resize(static_cast<size_t>(rows));
      for (int64_t i = 0; i < rows; ++i)
        host_ints[static_cast<size_t>(i)] =
            static_cast<int32_t>(checked_token_id(x[i], g.vocab_size, "Embedding"));
    }
    // SoftmaxCrossEntropy::forward's checks.
    SL_ENFORCE(rows == static_cast<int64_t>(b.targets.size()),
               "SoftmaxCrossEntropy: {} rows of logits but {} targets", rows, b.targets.size());
    SL_ENFORCE(rows > 0 && classes > 0, "SoftmaxCrossEntropy: empty logits {}",
               to_string(Shape{rows, classes}));
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t t = b.targets[static_cast<size_t>(r)];
      SL_ENFORCE(t >= 0 && t < classes,
                 "SoftmaxCrossEntropy: target {} of row {} is outside [0, {})", t, r, classes);
    }

    if (!gpt) {
      float* d_in = input.resize(*ctx, x.numel());
      int32_t* d_t = ints.resize(*ctx, rows);
      upload_packed({{d_in, x.data(), static_cast<size_t>(x.numel()) * sizeof(float)},
                     {d_t, b.targets.data(), static_cast<size_t>(rows) * sizeof(int32_t)}});
      targets = d_t;
      return;
    }
    // ids | targets | order | seg_start | seg_id
    const kernels::EmbeddingGradIndex gi =
        kernels::embedding_grad_index(host_ints.data(), rows, config.gpt.vocab_size);
    const int64_t segs = gi.segments();
    SL_ENFORCE_T(InternalError,
                 static_cast<int64_t>(gi.order.size()) == rows &&
                     static_cast<int64_t>(gi.seg_start.size()) == segs + 1,
                 "embedding gradient index of {} rows has {} rows and {} offsets for {} segments",
                 rows, gi.order.size(), gi.seg_start.size(), segs);
    host_ints.insert(host_ints.end(), b.targets.begin(), b.targets.end());
    host_ints.insert(host_ints.end(), gi.order.begin(), gi.order.end());
    host_ints.insert(host_ints.end(), gi.seg_start.begin(), gi.seg_start.end());
    host_ints.insert(host_ints.end(), gi.seg_id.begin(), gi.seg_id.end());
    int32_t* d = ints.resize(*ctx, static_cast<int64_t>(host_ints.size()));
    upload_packed({{d, host_ints.data(), host_ints.size() * sizeof(int32_t)}});
    targets = d + rows;
    index.order = d + 2 * rows;
    index.seg_start = d + 3 * rows;
    index.seg_id = d + 3 * rows + segs + 1;
    index.segments = segs;
  }

  const float* run_forward() {
    if (!gpt) {
      const float* cur = input.data();
      for (auto& blk : mlp) cur = blk->forward(cur, rows);
      return cur;
    }
    const float* cur = embed->forward(ints.data(), batch, steps);
    for (auto& blk : blocks) cur = blk->forward(cur, batch, steps);
    return head->forward(cur, rows);
  }

  void run_backward(const float* dlog) {
    if (!gpt) {
      const float* cur = dlog;
      for (size_t i = mlp.size(); i-- > 0;) cur = mlp[i]->backward(cur, /*need_dx=*/i > 0);
      return;
    }
    const float* cur = head->backward(dlog);
    for (size_t i = blocks.size(); i-- > 0;) cur = blocks[i]->backward(cur);
    embed->backward(cur, index);
  }
};

GpuModel::GpuModel(const ModelConfig& config, std::span<const float> host_params, CudaContext& ctx)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.config = config;
  m.ctx = &ctx;
  // The CPU model's blocks declare the layout (and validate the config, with its messages); with
  // external storage it holds no parameters. Its few host bytes (empty activation tensors) are
  // not this device model's memory: kept off the caller's ledger.
  {
    LedgerScope off_ledger(nullptr);
    m.cpu_layout = build_model(config, ModelStorage::external);
  }
  m.gpt = config.kind == "gpt";
  m.n = m.cpu_layout->num_params();
  SL_ENFORCE(static_cast<int64_t>(host_params.size()) == m.n,
             "GpuModel: {} parameters given, the {} model has {}", host_params.size(), config.kind,
             m.n);
  ctx.make_current();
  m.params = CudaBuffer<float>(MemCategory::params, static_cast<size_t>(m.n));
  m.grads = CudaBuffer<float>(MemCategory::grads, static_cast<size_t>(m.n));
  ctx.order_after_default_stream();  // after both buffers' zero-fill
  m.build_layers();
  upload_params(host_params);
}

GpuModel::~GpuModel() = default;

const ModelConfig& GpuModel::config() const {
  return impl_->config;
}
const ParamLayout& GpuModel::layout() const {
  return impl_->cpu_layout->layout();
}
int64_t GpuModel::num_params() const {
  return impl_->n;
}
CudaContext& GpuModel::context() const {
  return *impl_->ctx;
}
float* GpuModel::params() {
  return impl_->params.data();
}
const float* GpuModel::params() const {
  return impl_->params.data();
}
float* GpuModel::grads() {
  return impl_->grads.data();
}
const float* GpuModel::grads() const {
  return impl_->grads.data();
}

void GpuModel::zero_grad() {
  Impl& m = *impl_;
  if (m.n == 0) return;
  SL_CUDA_CHECK(
      cudaMemsetAsync(m.grads.data(), 0, static_cast<size_t>(m.n) * sizeof(float), m.ctx->stream()),
      "GpuModel::zero_grad");
}

float GpuModel::forward_loss(const Batch& batch, int64_t* correct) {
  Impl& m = *impl_;
  m.have_forward = false;
  m.ctx->make_current();
  m.upload_batch(batch);  // host checks first: a bad batch throws before any device work
  return device_call("GpuModel", [&] {
    cudaStream_t s = m.ctx->stream();
    const int64_t rows = m.rows, classes = m.classes;
    const float* logits = m.run_forward();
    float* probs = m.probs.resize(*m.ctx, rows * classes);
    double* row_loss = m.row_loss.resize(*m.ctx, rows);
    int32_t* row_correct = correct ? m.row_correct.resize(*m.ctx, rows) : nullptr;
    kernels::softmax_xent_forward_cuda(logits, m.targets, probs, row_loss, row_correct, rows,
                                       classes, s);
    // Both results in one staging buffer and one wait.
    const size_t loss_bytes = static_cast<size_t>(rows) * sizeof(double);
    const size_t correct_bytes = correct ? static_cast<size_t>(rows) * sizeof(int32_t) : 0;
    char* stage = m.down.reserve(loss_bytes + correct_bytes);
    SL_CUDA_CHECK(cudaMemcpyAsync(stage, row_loss, loss_bytes, cudaMemcpyDeviceToHost, s),
                  "GpuModel::forward_loss: row losses");
    if (correct)
      SL_CUDA_CHECK(cudaMemcpyAsync(stage + loss_bytes, row_correct, correct_bytes,
                                    cudaMemcpyDeviceToHost, s),
                    "GpuModel::forward_loss: row correct");
    m.ctx->sync("GpuModel::forward_loss");
    m.up_pending = false;
    // As SoftmaxCrossEntropy::forward: the row losses summed in double in row order.
    double total = 0;
    for (int64_t r = 0; r < rows; ++r) {
      double v;
      std::memcpy(&v, stage + static_cast<size_t>(r) * sizeof(double), sizeof v);
      total += v;
    }
    if (correct) {
      int64_t c = 0;
      for (int64_t r = 0; r < rows; ++r) {
        int32_t v;
        std::memcpy(&v, stage + loss_bytes + static_cast<size_t>(r) * sizeof(int32_t), sizeof v);
        c += v;
      }
      *correct = c;
    }
    m.have_forward = true;
    return static_cast<float>(total / static_cast<double>(rows));
  });
}

void GpuModel::backward(float scale) {
  Impl& m = *impl_;
  SL_ENFORCE(m.have_forward, "GpuModel: backward called before forward_loss");
  m.ctx->make_current();
  device_call("GpuModel", [&] {
    cudaStream_t s = m.ctx->stream();
    const int64_t n = m.rows * m.classes;
    float* dlog = m.dlogits.resize(*m.ctx, n);
    // The mean loss's gradient, then the micro-batch scale as a separate multiply, as the CPU
    // path (SoftmaxCrossEntropy::backward, then run_micro_batches) rounds it.
    const float inv_rows = 1.0f / static_cast<float>(m.rows);
    kernels::softmax_xent_backward_cuda(m.probs.data(), m.targets, dlog, m.rows, m.classes,
                                        inv_rows, s);
    if (scale != 1.0f) kernels::scale_cuda(dlog, n, scale, s);
    m.run_backward(dlog);
  });
}

std::vector<float> GpuModel::download_params() const {
  Impl& m = *impl_;
  std::vector<float> out(static_cast<size_t>(m.n));
  m.ctx->make_current();
  m.download(out.data(), m.params.data(), out.size() * sizeof(float), "GpuModel::download_params");
  return out;
}

void GpuModel::upload_params(std::span<const float> host_params) {
  Impl& m = *impl_;
  SL_ENFORCE(static_cast<int64_t>(host_params.size()) == m.n,
             "GpuModel: {} parameters given, the {} model has {}", host_params.size(),
             m.config.kind, m.n);
  m.ctx->make_current();
  m.upload(m.params.data(), host_params.data(), host_params.size() * sizeof(float));
}

std::vector<float> GpuModel::download_grads() const {
  Impl& m = *impl_;
  std::vector<float> out(static_cast<size_t>(m.n));
  m.ctx->make_current();
  m.download(out.data(), m.grads.data(), out.size() * sizeof(float), "GpuModel::download_grads");
  return out;
}

}  // namespace shardlab
