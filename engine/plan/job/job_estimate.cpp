#include "engine/plan/job/job_estimate.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/hybrid/pipeline_stage.h"
#include "engine/plan/memory/planner.h"
#include "engine/plan/job/job_work.h"

namespace shardlab::plan {
namespace {

double d(int64_t x) {
  return static_cast<double>(x);
}

// Ring collectives on the measured link: how many times the ranks meet (each meeting's cost is
// measured apart, CpuOpCosts::sync) and the data movement, which on the threads backend is CPU
// work on the ranks' own cores.
struct Cost {
  double calls = 0, work = 0;
  Cost& operator+=(const Cost& o) {
    calls += o.calls, work += o.work;
    return *this;
  }
};

Cost all_reduce(double bytes, int64_t n, const LinkSpec& l, int64_t calls = 1) {
  if (n <= 1) return {};
  return {d(calls), bytes * 2 * d(n - 1) / d(n) / l.busbw_bytes_per_s};
}
Cost half_ring(double bytes, int64_t n, const LinkSpec& l, int64_t calls = 1) {
  if (n <= 1) return {};
  return {d(calls), bytes * d(n - 1) / d(n) / l.busbw_bytes_per_s};
}
Cost send(double bytes, const LinkSpec& l, int64_t calls) {
  return {d(calls), bytes / l.busbw_bytes_per_s};
}

int64_t round_up(int64_t x, int64_t n) {
  return (x + n - 1) / n * n;
}

struct RankTime {
  double compute = 0, optimizer = 0, bubble = 0;
  Cost tp, pp, dp;
  double meetings() const { return tp.calls + pp.calls + dp.calls; }
  // Its own work on a core, each meeting costing `sync`.
  double work(double sync) const {
    return compute + optimizer + tp.work + pp.work + dp.work + meetings() * sync;
  }
  double path(double sync) const { return work(sync) + bubble; }
};

// A data-parallel job (strategy none, ddp, zero1, zero2, fsdp): every rank alike.
RankTime data_parallel_rank(const JobSpec& job, const ClusterSpec& cl, double& gemm) {
  const CpuOpCosts& c = *cl.cpu_ops;
  const ParallelConfig& p = job.parallel;
  const int64_t n = p.strategy == "none" ? 1 : p.world_size;
  const int64_t acc = std::max<int64_t>(1, job.train.accumulation_steps);
  const int64_t rows = job.train.batch_size / n / acc;
  Work w;
  // The batch gathered: image features through the normalisation table, token ids copied.
  w.other += job.model.kind == "mlp"
                 ? c.seconds(CpuOp::gather, d(rows * acc * job.model.mlp.input_dim))
                 : c.seconds(CpuOp::copy, d(rows * acc * (job.model.gpt.context + 1)));
  for (int64_t i = 0; i < acc; ++i)
    w += job.model.kind == "mlp" ? mlp_work(job.model.mlp, rows, c)
                                 : gpt_work(job.model.gpt, 0, job.model.gpt.layers + 2, rows, 1, c);
  const ParamLayout layout = model_layout(job.model);
  const int64_t psi = layout.size();
  const int64_t padded = round_up(psi, n);
  RankTime r;
  r.compute = w.total();
  gemm = w.gemm;
  const LinkSpec& l = cl.intra_node;
  const int64_t bucket = std::max<int64_t>(1, static_cast<int64_t>(p.bucket_mb * 1024 * 1024));
  const int64_t buckets = (4 * padded + bucket - 1) / bucket;
  int64_t owned = psi, normed = (psi + n - 1) / n;
  // The step's loss and squared gradient norm, summed over the ranks (one small all-reduce).
  r.dp = all_reduce(16, n, l);
  if (p.strategy == "ddp") {
    r.dp += all_reduce(4.0 * d(psi), n, l, buckets);
  } else if (p.strategy == "zero1") {
    r.dp += all_reduce(4.0 * d(padded), n, l, buckets);
    r.dp += half_ring(4.0 * d(padded), n, l, buckets);
    owned = normed = padded / n;
  } else if (p.strategy == "zero2") {
    r.dp += half_ring(4.0 * d(padded), n, l, buckets);
    r.dp += half_ring(4.0 * d(padded), n, l, buckets);
    owned = normed = padded / n;
  } else if (p.strategy == "fsdp") {
    owned = 0;
    const int gathers = p.fsdp_keep_params ? 1 : 2;
    for (int b = 0; b < layout.num_blocks(); ++b) {
      const int64_t block = round_up(layout.block_range(b).size(), n);
      r.dp += half_ring(4.0 * d(block) * gathers, n, l, gathers);  // all-gathers
      r.dp += half_ring(4.0 * d(block), n, l);                     // the gradients' reduce-scatter
      owned += block / n;
    }
    normed = owned;
  }
  r.optimizer = optimizer_seconds(job.optimizer.name, d(owned), c) +
                c.seconds(CpuOp::zero, d(p.strategy == "fsdp" ? owned : psi)) +
                c.seconds(CpuOp::grad_norm, d(normed));
  return r;
}

// One rank of a pp x tp x dp job.
RankTime hybrid_rank(const JobSpec& job, const ClusterSpec& cl, const ParamLayout& full, int rank,
                     double& gemm, double& micro_batch_seconds) {
  const CpuOpCosts& c = *cl.cpu_ops;
  const ParallelConfig& p = job.parallel;
  const GptConfig& g = job.model.gpt;
  const int64_t pp = p.pp, tp = p.tp, dp = p.world_size / (pp * tp);
  const int64_t m = std::max<int64_t>(1, p.micro_batches);
  const int64_t v = p.schedule == "interleaved" ? std::max<int64_t>(1, p.pp_chunks) : 1;
  const int stage = static_cast<int>(rank / (tp * dp));  // ranks ordered tp, dp, pp
  const int64_t seqs = job.train.batch_size / dp / m;
  const std::vector<IndexRange> chunks =
      stage_chunks(full, static_cast<int>(pp), static_cast<int>(v), p.pp_partition, stage);
  Work w;
  int64_t blocks = 0;
  bool first = false, last = false;
  for (const IndexRange& ch : chunks) {
    w += gpt_work(g, ch.begin, ch.end, seqs, tp, c);
    for (int64_t b = ch.begin; b < ch.end; ++b) {
      if (b >= 1 && b <= g.layers) ++blocks;
      first = first || b == 0;
      last = last || b == g.layers + 1;
    }
  }
  RankTime r;
  micro_batch_seconds = w.total();
  r.compute = d(m) * w.total();
  gemm = d(m) * w.gemm;
  const LinkSpec& l = cl.intra_node;
  const double act = 4.0 * d(seqs * g.context * g.width);  // one micro-batch's hidden states
  // Tensor parallel, per micro-batch: two all-reduces forward and two backward per block
  // (Megatron's f and g), one for the embedding's rows, and on the last stage the head's input
  // gradient and the vocabulary-parallel loss's four row reductions (max, sum, target logit, the
  // best guess); once a step the replicated parameters' gradients (tensor_parallel_grad_sync).
  const int64_t big = m * (4 * blocks + (first ? 1 : 0) + (last ? 1 : 0));
  const int64_t small = m * (last ? 4 : 0) + 1;
  r.tp = all_reduce(act * d(big), tp, l, big);
  r.tp += all_reduce(4.0 * d(seqs * g.context) * d(small), tp, l, small);
  // Pipeline: each chunk boundary sends forward and backward once per micro-batch.
  if (pp > 1) {
    const int64_t sends = m * 2 * d(chunks.size()) - (first ? m : 0) - (last ? m : 0);
    r.pp = send(act * d(std::max<int64_t>(0, sends)), l, std::max<int64_t>(0, sends));
  }
  const MemoryPlan mp = plan_memory_hybrid(job.model, job.optimizer, p, p.world_size, rank);
  const double psi = d(mp.params), padded = d(mp.padded_params);
  // The step's loss and squared gradient norm over the world, then the gradients over dp.
  r.dp = all_reduce(16, p.world_size, l);
  if (p.strategy == "ddp") {
    r.dp += all_reduce(4 * psi, dp, l);
  } else if (p.strategy == "zero1") {
    r.dp += all_reduce(4 * padded, dp, l);
    r.dp += half_ring(4 * padded, dp, l);
  } else {
    r.dp += half_ring(4 * padded, dp, l);
    r.dp += half_ring(4 * padded, dp, l);
  }
  r.compute += c.seconds(CpuOp::copy, d(m * seqs * (g.context + 1)));  // token ids
  r.optimizer = optimizer_seconds(job.optimizer.name, d(mp.shard), c) +
                c.seconds(CpuOp::zero, psi) + c.seconds(CpuOp::grad_norm, d(mp.shard));
  return r;  // (the bubble is the caller's: it needs the slowest stage)
}

}  // namespace

const char* job_left_out_text() {
  return "left out: data shuffling, evaluation, logging and telemetry, memory allocation and page "
         "faults, and scheduling beyond a fair share of the cores";
}

JobEstimate estimate_job(const JobSpec& job, const ClusterSpec& cluster) {
  SL_ENFORCE(cluster.cpu_ops.has_value(),
             "plan --job: the cluster '{}' has no measured CPU kernel costs (cpu_ops): measure "
             "this machine with shardlab plan --calibrate --out FILE and pass --cluster FILE",
             cluster.name);
  SL_ENFORCE(job.device == "cpu", "plan --job: predicts CPU jobs only, this one has device '{}'",
             job.device);
  JobEstimate e;
  const ParallelConfig& p = job.parallel;
  e.ranks = p.strategy == "none" ? 1 : static_cast<int>(p.world_size);
  e.cores = std::max(1, cluster.gpus_per_node);
  const JobMemoryPlan mem = plan_job_memory(job.model, job.optimizer, p);
  e.memory = mem.steady;
  e.memory_formula = mem.formula;

  std::vector<RankTime> ranks;
  double gemm = 0, compute = 0;
  if (uses_model_parallelism(p)) {
    const ParamLayout full = model_layout(job.model);
    double slowest_mb = 0;
    std::vector<double> mb(static_cast<size_t>(e.ranks));
    for (int r = 0; r < e.ranks; ++r) {
      double g = 0;
      ranks.push_back(hybrid_rank(job, cluster, full, r, g, mb[static_cast<size_t>(r)]));
      gemm += g;
      slowest_mb = std::max(slowest_mb, mb[static_cast<size_t>(r)]);
    }
    const int64_t v = p.schedule == "interleaved" ? std::max<int64_t>(1, p.pp_chunks) : 1;
    for (RankTime& r : ranks) r.bubble = (d(p.pp) - 1) / d(v) * slowest_mb;
  } else {
    double g = 0;
    const RankTime r = data_parallel_rank(job, cluster, g);
    ranks.assign(static_cast<size_t>(e.ranks), r);
    gemm = g * e.ranks;
  }
  const double per_core = static_cast<double>(e.ranks) / e.cores;
  const double sync = cluster.cpu_ops->sync_seconds(std::max(1.0, per_core), p.backend);
  // The kernels run slower inside a step than alone, more so with ranks sharing a core.
  const double in_step = cluster.cpu_ops->in_step_factor(per_core);
  for (RankTime& r : ranks) r.compute *= in_step, r.optimizer *= in_step, r.bubble *= in_step;
  gemm *= in_step;
  e.in_step_factor = in_step;
  const RankTime* slowest = &ranks.front();
  double summed_work = 0;
  for (const RankTime& r : ranks) {
    summed_work += r.work(sync);
    compute += r.compute;
    if (r.path(sync) > slowest->path(sync)) slowest = &r;
  }
  e.gemm_share = compute > 0 ? gemm / compute : 0;
  e.critical_path_seconds = slowest->path(sync);
  e.cores_bound_seconds = summed_work / std::min(e.ranks, e.cores);
  e.bound_by_cores = e.ranks > e.cores && e.cores_bound_seconds > e.critical_path_seconds;
  e.step_seconds = std::max(e.critical_path_seconds, e.cores_bound_seconds);

  // The split: the slowest rank's parts, or when the cores bound the step the average rank's
  // work parts (the bubble and the waiting then fill with other ranks' work) scaled to the step.
  JobTime& t = e.time;
  if (e.bound_by_cores) {
    RankTime sum;
    for (const RankTime& r : ranks) {
      sum.compute += r.compute, sum.optimizer += r.optimizer;
      sum.tp.work += r.tp.work + r.tp.calls * sync, sum.pp.work += r.pp.work + r.pp.calls * sync;
      sum.dp.work += r.dp.work + r.dp.calls * sync;
    }
    const double k = e.step_seconds / summed_work;
    t = {sum.compute * k, sum.tp.work * k, sum.pp.work * k, sum.dp.work * k, 0, sum.optimizer * k};
  } else {
    const RankTime& r = *slowest;
    t = {r.compute,
         r.tp.work + r.tp.calls * sync,
         r.pp.work + r.pp.calls * sync,
         r.dp.work + r.dp.calls * sync,
         r.bubble,
         r.optimizer};
  }
  if (e.bound_by_cores)
    e.why = fmt::format(
        "{} ranks share {} cores: the step is their summed work over the cores ({:.1f} ms, "
        "kernels x{:.2f} in a step, {:.0f} us a meeting; the slowest rank alone, waits and "
        "bubble included, {:.1f} ms)",
        e.ranks, e.cores, e.cores_bound_seconds * 1e3, in_step, sync * 1e6,
        e.critical_path_seconds * 1e3);
  else
    e.why = fmt::format(
        "{} on {} of {} cores: the slowest rank's compute {:.1f} ms ({:.0f}% in GEMMs, kernels "
        "x{:.2f} in a step), collectives {:.1f} ms, bubble {:.1f} ms, optimizer {:.1f} ms",
        e.ranks == 1 ? std::string("one process") : fmt::format("{} ranks", e.ranks),
        std::min(e.ranks, e.cores), e.cores, slowest->compute * 1e3, 100 * e.gemm_share, in_step,
        (t.tp + t.pp + t.dp) * 1e3, slowest->bubble * 1e3, slowest->optimizer * 1e3);
  return e;
}

nlohmann::ordered_json job_estimate_to_json(const JobSpec& job, const JobEstimate& e) {
  nlohmann::ordered_json j;
  j["job"] = job.name;
  j["ranks"] = e.ranks;
  j["cores"] = e.cores;
  j["step_seconds"] = e.step_seconds;
  j["time_seconds"] = {{"compute", e.time.compute}, {"tp", e.time.tp},
                       {"pp", e.time.pp},           {"dp", e.time.dp},
                       {"bubble", e.time.bubble},   {"optimizer", e.time.optimizer}};
  j["bound_by"] = e.bound_by_cores ? "cores" : "slowest rank";
  j["critical_path_seconds"] = e.critical_path_seconds;
  j["cores_bound_seconds"] = e.cores_bound_seconds;
  j["gemm_share"] = e.gemm_share;
  j["in_step_factor"] = e.in_step_factor;
  nlohmann::ordered_json mem = nlohmann::ordered_json::array();
  for (const MemoryFigures& f : e.memory)
    mem.push_back({{"params", f[MemCategory::params]},
                   {"grads", f[MemCategory::grads]},
                   {"optimizer_state", f[MemCategory::optimizer_state]}});
  j["memory_bytes_by_rank"] = mem;
  j["memory_formula"] = e.memory_formula;
  j["why"] = e.why;
  j["left_out"] = job_left_out_text();
  return j;
}

}  // namespace shardlab::plan
