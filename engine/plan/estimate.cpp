#include "engine/plan/estimate.h"

#include <algorithm>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/plan/model_states.h"

namespace shardlab::plan {
namespace {

// A ring all-reduce of `bytes` over n ranks: 2 (n-1)/n of the bytes at the bus bandwidth, and
// 2 (n-1) latencies.
double ring_all_reduce(int n, double bytes, const LinkSpec& link) {
  if (n <= 1) return 0;
  return 2.0 * (n - 1) / n * bytes / link.busbw_bytes_per_s + 2.0 * (n - 1) * link.latency_s;
}
// Reduce-scatter or all-gather: half the all-reduce.
double ring_half(int n, double bytes, const LinkSpec& link) {
  if (n <= 1) return 0;
  return 1.0 * (n - 1) / n * bytes / link.busbw_bytes_per_s + 1.0 * (n - 1) * link.latency_s;
}

struct Stage {
  double params = 0;  // elements on one GPU of the stage
  int64_t layers = 0;
  bool first = false, last = false;
};

std::vector<Stage> stages_of(const GptShape& g, const Layout& l) {
  const double h = static_cast<double>(g.hidden), f = static_cast<double>(g.ffn_width());
  const double t = l.tp;
  // Tensor parallel slices the matrices and their column-parallel biases (qkv 3h, fc1 F); the
  // row-parallel biases (2h) and the layer norms (4h) are whole on every rank.
  const double layer = (4 * h * h + 2 * h * f + 3 * h + f) / t + 6 * h;
  std::vector<Stage> out(static_cast<size_t>(l.pp));
  for (int i = 0; i < l.pp; ++i) {
    Stage& s = out[static_cast<size_t>(i)];
    s.layers = g.layers / l.pp;
    s.first = i == 0;
    s.last = i == l.pp - 1;
    s.params = static_cast<double>(s.layers) * layer;
    // Token embedding (vocab-parallel) and position embedding on the first stage; the last
    // holds the tied output head's copy of the token embedding when it is another stage.
    if (s.first) s.params += static_cast<double>(g.vocab) * h / t + static_cast<double>(g.seq) * h;
    if (s.last && !s.first) s.params += static_cast<double>(g.vocab) * h / t;
  }
  return out;
}

}  // namespace

const char* left_out_text() {
  return "left out: the CUDA context and allocator fragmentation (beyond the usable share of "
         "HBM), kernel launch gaps, stragglers, data loading and checkpoints";
}

std::string layout_problem(const PlanJob& job, const ClusterSpec& c, const Layout& l) {
  const GptShape& g = job.model;
  if (l.pp < 1 || l.tp < 1 || l.dp < 1 || l.micro_batch < 1 || l.interleave < 1)
    return "pp, tp, dp, micro-batch and interleave must be at least 1";
  if (static_cast<int64_t>(l.pp) * l.tp * l.dp != job.gpus)
    return fmt::format("pp {} x tp {} x dp {} is {} GPUs, not {}", l.pp, l.tp, l.dp,
                       static_cast<int64_t>(l.pp) * l.tp * l.dp, job.gpus);
  if (g.heads % l.tp != 0) return fmt::format("tp {} does not divide {} heads", l.tp, g.heads);
  if (g.ffn_width() % l.tp != 0)
    return fmt::format("tp {} does not divide the MLP width {}", l.tp, g.ffn_width());
  if (l.tp > c.gpus_per_node)
    return fmt::format("tp {} spans nodes of {} GPUs", l.tp, c.gpus_per_node);
  if (g.layers % (static_cast<int64_t>(l.pp) * l.interleave) != 0)
    return fmt::format("pp {} x interleave {} does not divide {} layers", l.pp, l.interleave,
                       g.layers);
  if (job.global_batch % (l.dp * l.micro_batch) != 0)
    return fmt::format("dp {} x micro-batch {} does not divide the batch of {}", l.dp,
                       l.micro_batch, job.global_batch);
  if (l.zero < 0 || l.zero > 3) return fmt::format("zero must be 0-3, got {}", l.zero);
  if (l.zero >= 2 && l.pp > 1)
    return fmt::format(
        "ZeRO {} shards gradients that pipeline stages accumulate over "
        "micro-batches (DeepSpeed allows only stages 0-1 with a pipeline)",
        l.zero);
  if (l.sequence_parallel && l.tp == 1) return "sequence parallelism needs tp > 1";
  const int64_t m = job.global_batch / (l.dp * l.micro_batch);
  if (l.interleave > 1 && (l.pp == 1 || m % l.pp != 0))
    return fmt::format("interleave {} needs a pipeline and micro-batches ({}) a multiple of pp {}",
                       l.interleave, m, l.pp);
  return "";
}

Estimate estimate(const PlanJob& job, const ClusterSpec& c, const Layout& l) {
  check_shape(job.model);
  const std::string problem = layout_problem(job, c, l);
  SL_ENFORCE(problem.empty(), "this layout cannot run: {}", problem);
  const GptShape& g = job.model;
  const double s = static_cast<double>(g.seq), h = static_cast<double>(g.hidden);
  const double b = static_cast<double>(l.micro_batch);
  const double v = l.interleave, p = l.pp;
  const int t = l.tp;
  Estimate e;
  e.layout = l;
  e.micro_batches = job.global_batch / (l.dp * l.micro_batch);
  const double m = static_cast<double>(e.micro_batches);
  const StateWidths widths{2, job.fp32_grads ? 4 : 2, 12};
  const std::vector<Stage> stages = stages_of(g, l);

  // Memory, stage by stage.
  const double layer_act = layer_activation_bytes(g, b, t, l.sequence_parallel, l.recompute);
  const double layer_act_full =
      layer_activation_bytes(g, b, t, l.sequence_parallel, Recompute::none);
  const double interleave_factor = l.interleave > 1 ? 1 + (p - 1) / (p * v) : 1;
  for (int i = 0; i < l.pp; ++i) {
    const Stage& st = stages[static_cast<size_t>(i)];
    const int64_t full = static_cast<int64_t>(st.params);
    const ModelStateBytes ms = zero_model_states(l.zero, full, (full + l.dp - 1) / l.dp, widths);
    MemoryBreakdown mb;
    mb.params = static_cast<double>(ms.params);
    mb.grads = static_cast<double>(ms.grads);
    mb.optimizer_state = static_cast<double>(ms.optimizer_state);
    const double in_flight = std::min(m, p - i) * interleave_factor;
    mb.activations = static_cast<double>(st.layers) * layer_act * in_flight;
    if (st.first) mb.activations += s * b * h * in_flight / (l.sequence_parallel ? t : 1);
    if (st.last) mb.activations += 4 * s * b * static_cast<double>(g.vocab) / t;
    if (l.recompute == Recompute::full) mb.activations += layer_act_full;
    if (t > 1) mb.comm += 2 * 2 * s * b * h;
    if (l.pp > 1) mb.comm += 2 * 2 * s * b * h / t;
    if (l.zero == 3 && st.layers > 0)
      mb.comm += 2 * widths.param * st.params / static_cast<double>(st.layers);
    e.stages.push_back(mb);
    if (mb.total() > e.stages[static_cast<size_t>(e.fullest_stage)].total()) e.fullest_stage = i;
  }
  e.memory = e.stages[static_cast<size_t>(e.fullest_stage)];
  e.usable_bytes = c.gpu.hbm_bytes * c.usable_memory_share;
  e.fits = e.memory.total() <= e.usable_bytes;

  // Time of one micro-batch on the slowest stage (the last: it adds the output head).
  const double flops_rate = c.gpu.peak_flops * c.matmul_efficiency;
  const double tokens = s * b;
  const double fwd = layer_forward_flops(g, tokens, t);
  double layer_flops = 3 * fwd;
  double passes = 3;  // activation traffic: written forward, read and gradients written backward
  double extra_traffic = 0;
  if (l.recompute == Recompute::full) {
    layer_flops += fwd;
    passes += 1;
  } else if (l.recompute == Recompute::selective) {
    layer_flops += 12 * tokens * s * h / t;
    extra_traffic = 5 * static_cast<double>(g.heads) * s * s * b / t;
  }
  const Stage& last = stages.back();
  const double layers = static_cast<double>(last.layers);
  const double compute_mb =
      layers * (layer_flops / flops_rate +
                (passes * layer_act_full + extra_traffic) / c.gpu.hbm_bytes_per_s) +
      3 * logits_forward_flops(g, tokens, t) / flops_rate;
  const LinkSpec& tp_link = t <= c.gpus_per_node ? c.intra_node : c.inter_node;
  const int tp_reduces = l.recompute == Recompute::full ? 6 : 4;
  const double tp_mb = layers * tp_reduces * ring_all_reduce(t, 2 * s * b * h, tp_link);
  const bool stages_cross_nodes = static_cast<int64_t>(t) * l.dp >= c.gpus_per_node;
  const LinkSpec& pp_link = stages_cross_nodes ? c.inter_node : c.intra_node;
  const double send = pp_link.latency_s + 2 * s * b * h / t / pp_link.busbw_bytes_per_s;
  const double pp_mb = l.pp > 1 ? 2 * send * v : 0;
  const double t_mb = compute_mb + tp_mb + pp_mb;
  e.time.compute = m * compute_mb;
  e.time.tp = m * tp_mb;
  e.time.pp = m * pp_mb;
  e.time.bubble = (p - 1) / v * t_mb;

  // Data parallel: the gradients of the stage's parameters.
  const bool dp_crosses_nodes = static_cast<int64_t>(t) * l.dp > c.gpus_per_node;
  const LinkSpec& dp_link = dp_crosses_nodes ? c.inter_node : c.intra_node;
  const double psi = last.params;
  const auto w = [](int64_t bytes) { return static_cast<double>(bytes); };
  double dp = 0;
  if (l.zero == 0)
    dp = ring_all_reduce(l.dp, psi * w(widths.grad), dp_link);
  else if (l.zero <= 2)
    dp = ring_half(l.dp, psi * w(widths.grad), dp_link) +
         ring_half(l.dp, psi * w(widths.param), dp_link);
  else
    dp = ring_half(l.dp, psi * w(widths.grad), dp_link) +
         2 * ring_half(l.dp, psi * w(widths.param), dp_link);
  const double hidden = job.dp_overlap ? std::min(dp, compute_mb * 2.0 / 3.0) : 0;
  e.time.dp = dp - hidden;
  const double updated = l.zero >= 1 ? psi / l.dp : psi;
  e.time.optimizer = updated * (26 + w(widths.grad)) / c.gpu.hbm_bytes_per_s;

  e.step_seconds = e.time.total();
  const double n = static_cast<double>(job.gpus);
  const double batch = static_cast<double>(job.global_batch);
  e.tflops_per_gpu = model_flops(g, batch) / n / e.step_seconds / 1e12;
  e.hw_tflops_per_gpu = hardware_flops(g, batch, l.recompute) / n / e.step_seconds / 1e12;
  e.mfu = e.tflops_per_gpu * 1e12 / c.gpu.peak_flops;
  return e;
}

}  // namespace shardlab::plan
