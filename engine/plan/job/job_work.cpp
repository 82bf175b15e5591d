#include "engine/plan/job/job_work.h"

#include <string>

#include "engine/core/error.h"

namespace shardlab::plan {
namespace {

double d(int64_t x) {
  return static_cast<double>(x);
}

// y = x W^T + b on `rows` rows (forward), then dW, db and (unless params_only) dx.
Work linear(int64_t rows, int64_t in, int64_t out, bool bias, bool params_only,
            const CpuOpCosts& c) {
  Work w;
  w.other += c.seconds(CpuOp::copy, d(rows * in));  // the input kept for backward
  w.gemm += c.gemm_seconds(rows, out, in);          // forward
  w.gemm += c.gemm_seconds(out, in, rows);          // dW
  if (!params_only) w.gemm += c.gemm_seconds(rows, in, out);
  if (bias)
    w.other +=
        c.seconds(CpuOp::bias_add, d(rows * out)) + c.seconds(CpuOp::bias_grad, d(rows * out));
  return w;
}

}  // namespace

Work mlp_work(const MlpConfig& m, int64_t rows, const CpuOpCosts& c) {
  Work w;
  int64_t in = m.input_dim;
  const bool gelu = m.activation == "gelu";
  for (size_t i = 0; i <= m.hidden.size(); ++i) {
    const int64_t out = i < m.hidden.size() ? m.hidden[i] : m.num_classes;
    w += linear(rows, in, out, true, /*params_only=*/i == 0, c);
    if (i < m.hidden.size()) {
      const double n = d(rows * out);
      // (each keeps a copy for backward: GeLU its input, ReLU its output)
      w.other += gelu ? c.seconds(CpuOp::gelu_forward, n) + c.seconds(CpuOp::gelu_backward, n)
                      : c.seconds(CpuOp::relu_forward, n) + c.seconds(CpuOp::relu_backward, n);
      w.other += c.seconds(CpuOp::copy, n);
    }
    in = out;
  }
  const double logits = d(rows * m.num_classes);
  w.other += c.seconds(CpuOp::xent_forward, logits) + c.seconds(CpuOp::xent_backward, logits);
  return w;
}

Work gpt_work(const GptConfig& g, int64_t first, int64_t last, int64_t sequences, int64_t tp,
              const CpuOpCosts& c) {
  const int64_t T = g.context, C = g.width, R = sequences * T, F = g.mlp_ratio * C;
  const int64_t heads = g.heads / tp, D = C / g.heads, V = g.vocab_size;
  const double rc = d(R * C);
  Work w;
  for (int64_t b = first; b < last; ++b) {
    if (b == 0) {
      w.other += c.seconds(CpuOp::embedding_forward, rc) + c.seconds(CpuOp::embedding_backward, rc);
    } else if (b <= g.layers) {
      w.other += 2 * (c.seconds(CpuOp::layer_norm_forward, rc) +
                      c.seconds(CpuOp::layer_norm_backward, rc));
      w.other += 4 * c.seconds(CpuOp::add, rc);  // two residuals, forward and backward
      w += linear(R, C, 3 * C / tp, true, false, c);
      w += linear(R, C / tp, C, true, false, c);
      w += linear(R, C, F / tp, true, false, c);
      w += linear(R, F / tp, C, true, false, c);
      w.other += c.seconds(CpuOp::gelu_forward, d(R * F / tp)) +
                 c.seconds(CpuOp::gelu_backward, d(R * F / tp)) +
                 c.seconds(CpuOp::copy, d(R * F / tp));  // its input kept
      const double per_head = 2 * c.gemm_seconds(T, T, D) + 4 * c.gemm_seconds(T, D, T);
      w.gemm += d(sequences * heads) * per_head;
      w.other += c.seconds(CpuOp::attention_softmax, d(sequences * heads * T * T));
    } else {
      w.other +=
          c.seconds(CpuOp::layer_norm_forward, rc) + c.seconds(CpuOp::layer_norm_backward, rc);
      const int64_t v = (V + tp - 1) / tp;
      w += linear(R, C, v, false, false, c);
      w.other +=
          c.seconds(CpuOp::xent_forward, d(R * v)) + c.seconds(CpuOp::xent_backward, d(R * v));
    }
  }
  return w;
}

double optimizer_seconds(const std::string& name, double elements, const CpuOpCosts& c) {
  if (name == "adam" || name == "adamw") return c.seconds(CpuOp::adam, elements);
  if (name == "sgd") return c.seconds(CpuOp::sgd, elements);
  if (name == "rmsprop") return c.seconds(CpuOp::rmsprop, elements);
  if (name == "adagrad") return c.seconds(CpuOp::adagrad, elements);
  SL_THROW(InvalidArgument, "plan --job: no measured cost for optimizer '{}'", name);
}

}  // namespace shardlab::plan
