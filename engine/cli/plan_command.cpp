// shardlab plan: a large GPT job's layouts on a cluster, estimated and ranked (engine/plan), as a
// table or one JSON document (fields: command_table.cpp). The searching and the formulas live in
// engine/plan; this file reads the flags and prints.
#include <fmt/format.h>

#include "engine/cli/args.h"
#include "engine/cli/command_spec.h"
#include "engine/cli/commands.h"
#include "engine/cli/json_output.h"
#include "engine/plan/search.h"

namespace shardlab::cli {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

int64_t required(const Args& args, const std::string& flag, int64_t max) {
  if (!args.has(flag)) SL_THROW(UsageError, "plan: {} is required", flag);
  return args.get_int(flag, 0, 1, max);
}

std::optional<int> fixed_int(const Args& args, const std::string& flag, int64_t min, int64_t max) {
  if (!args.has(flag)) return std::nullopt;
  return static_cast<int>(args.get_int(flag, 0, min, max));
}

Json memory_json(const plan::MemoryBreakdown& m) {
  const auto g = [](double b) { return std::round(b / kGiB * 100) / 100; };
  return Json{{"params", g(m.params)},
              {"grads", g(m.grads)},
              {"optimizer_state", g(m.optimizer_state)},
              {"activations", g(m.activations)},
              {"comm", g(m.comm)},
              {"total", g(m.total())}};
}

Json plan_json(const plan::Estimate& e, const std::string& why) {
  const plan::Layout& l = e.layout;
  Json stages = Json::array();
  for (const plan::MemoryBreakdown& m : e.stages)
    stages.push_back(std::round(m.total() / kGiB * 100) / 100);
  return Json{{"layout",
               {{"pp", l.pp},
                {"tp", l.tp},
                {"dp", l.dp},
                {"micro_batch", l.micro_batch},
                {"zero", l.zero},
                {"recompute", plan::recompute_name(l.recompute)},
                {"sequence_parallel", l.sequence_parallel},
                {"interleave", l.interleave}}},
              {"micro_batches", e.micro_batches},
              {"memory_gib_per_gpu", memory_json(e.memory)},
              {"fullest_stage", e.fullest_stage},
              {"stage_gib", stages},
              {"usable_gib", std::round(e.usable_bytes / kGiB * 100) / 100},
              {"fits", e.fits},
              {"step_seconds", e.step_seconds},
              {"time_seconds",
               {{"compute", e.time.compute},
                {"tp", e.time.tp},
                {"pp", e.time.pp},
                {"dp", e.time.dp},
                {"bubble", e.time.bubble},
                {"optimizer", e.time.optimizer}}},
              {"tflops_per_gpu", e.tflops_per_gpu},
              {"hw_tflops_per_gpu", e.hw_tflops_per_gpu},
              {"mfu", e.mfu},
              {"why", why}};
}

std::string billions(int64_t n) {
  return n >= 1000000000 ? fmt::format("{:.1f}B", static_cast<double>(n) / 1e9)
                         : fmt::format("{:.1f}M", static_cast<double>(n) / 1e6);
}

void print_table(const plan::PlanJob& job, const plan::ClusterSpec& c, const plan::PlanResult& r) {
  const plan::GptShape& g = job.model;
  fmt::print(
      "model: GPT, {} layers, hidden {}, {} heads, MLP {}, sequence {}, vocabulary {}: {} "
      "parameters\n",
      g.layers, g.hidden, g.heads, g.ffn_width(), g.seq, g.vocab,
      billions(plan::gpt_parameters(g)));
  fmt::print(
      "cluster: {} ({}, {} per node; all-reduce {:.0f} GB/s inside a node, {:.0f} GB/s per GPU "
      "between nodes), {} GPUs; global batch {}\n",
      c.name, c.gpu.name, c.gpus_per_node, c.intra_node.busbw_bytes_per_s / 1e9,
      c.inter_node.busbw_bytes_per_s / 1e9, job.gpus, job.global_batch);
  fmt::print("searched {} layouts{}\n\n", r.searched,
             r.any_fits ? "" : "; none fits in the GPUs' memory (the closest first)");
  fmt::print("{:>2}  {:>3} {:>2} {:>4} {:>3} {:>2} {:>4} {:>9} {:>2} {:>7} {:>8} {:>8} {:>5}  {}\n",
             "#", "pp", "tp", "dp", "mb", "v", "zero", "recompute", "sp", "GiB", "step(s)",
             "TFLOP/s", "MFU", "time: compute / tp / pp / dp / bubble / optimizer (s)");
  for (size_t i = 0; i < r.plans.size(); ++i) {
    const plan::Estimate& e = r.plans[i];
    const plan::Layout& l = e.layout;
    fmt::print(
        "{:>2}  {:>3} {:>2} {:>4} {:>3} {:>2} {:>4} {:>9} {:>2} {:>7.1f} {:>8.2f} {:>8.1f} "
        "{:>4.0f}%  {:.2f} / {:.2f} / {:.2f} / {:.2f} / {:.2f} / {:.3f}{}\n",
        i + 1, l.pp, l.tp, l.dp, l.micro_batch, l.interleave, l.zero,
        plan::recompute_name(l.recompute), l.sequence_parallel ? "y" : "n", e.memory.total() / kGiB,
        e.step_seconds, e.tflops_per_gpu, 100 * e.mfu, e.time.compute, e.time.tp, e.time.pp,
        e.time.dp, e.time.bubble, e.time.optimizer, e.fits ? "" : "  (does not fit)");
  }
  const plan::Estimate& best = r.plans.front();
  fmt::print("\n{}: {}\n", r.any_fits ? "best" : "closest", r.why.front());
  fmt::print(
      "per GPU on stage {} (the fullest): params {:.1f}, grads {:.1f}, optimizer state {:.1f}, "
      "activations {:.1f}, comm buffers {:.1f}: {:.1f} GiB of {:.1f} usable\n",
      best.fullest_stage, best.memory.params / kGiB, best.memory.grads / kGiB,
      best.memory.optimizer_state / kGiB, best.memory.activations / kGiB, best.memory.comm / kGiB,
      best.memory.total() / kGiB, best.usable_bytes / kGiB);
  fmt::print("{}\n", plan::left_out_text());
}

}  // namespace

int plan_command(const std::vector<std::string>& argv) {
  Args args(argv, arg_spec("plan"));
  args.expect_no_positional();
  const std::string model = args.get("--model", "gpt");
  if (model != "gpt") SL_THROW(UsageError, "plan: --model must be gpt, got '{}'", model);
  if (args.has("--gpu") && args.has("--cluster"))
    SL_THROW(UsageError, "plan: give --gpu or --cluster, not both");
  plan::ClusterSpec cluster;
  if (args.has("--cluster")) {
    cluster = plan::load_cluster_file(args.get("--cluster"));
  } else {
    if (!args.has("--gpu"))
      SL_THROW(UsageError, "plan: --gpu (one of {}) or --cluster FILE is required",
               fmt::join(plan::gpu_names(), ", "));
    cluster = plan::cluster_preset(args.get("--gpu"));
    cluster.gpus_per_node =
        static_cast<int>(args.get_int("--gpus-per-node", cluster.gpus_per_node, 1, 1024));
  }
  if (args.has("--print-cluster")) {
    print_json(plan::cluster_to_json(cluster));
    return 0;
  }
  plan::PlanJob job;
  plan::GptShape& g = job.model;
  g.layers = required(args, "--layers", 100000);
  g.hidden = required(args, "--hidden", 1 << 20);
  g.heads = required(args, "--heads", 1 << 16);
  g.ffn = args.has("--ffn") ? args.get_int("--ffn", 0, 1, 1 << 22) : 0;
  g.seq = required(args, "--seq", 1 << 24);
  g.vocab = required(args, "--vocab", 1 << 24);
  job.gpus = required(args, "--gpus", 1 << 20);
  job.global_batch = required(args, "--global-batch", int64_t{1} << 30);
  job.fp32_grads = args.has("--fp32-grads");
  job.dp_overlap = !args.has("--no-dp-overlap");
  plan::SearchOptions o;
  o.tp = fixed_int(args, "--tp", 1, 1 << 20);
  o.pp = fixed_int(args, "--pp", 1, 1 << 20);
  o.dp = fixed_int(args, "--dp", 1, 1 << 20);
  o.zero = fixed_int(args, "--zero", 0, 3);
  o.interleave = fixed_int(args, "--interleave", 1, 1024);
  if (args.has("--micro-batch")) o.micro_batch = args.get_int("--micro-batch", 1, 1, 1 << 20);
  if (args.has("--recompute")) o.recompute = plan::parse_recompute(args.get("--recompute"));
  if (args.has("--sequence-parallel")) o.sequence_parallel = true;
  o.top = static_cast<size_t>(args.get_int("--top", 5, 1, 1000));
  const plan::PlanResult r = plan::search_plans(job, cluster, o);

  if (args.has("--json")) {
    Json doc;
    doc["model"] = Json{{"layers", g.layers},
                        {"hidden", g.hidden},
                        {"heads", g.heads},
                        {"ffn", g.ffn_width()},
                        {"seq", g.seq},
                        {"vocab", g.vocab},
                        {"parameters", plan::gpt_parameters(g)}};
    doc["cluster"] = plan::cluster_to_json(cluster);
    doc["gpus"] = job.gpus;
    doc["global_batch"] = job.global_batch;
    doc["searched"] = r.searched;
    doc["any_fits"] = r.any_fits;
    doc["left_out"] = plan::left_out_text();
    Json plans = Json::array();
    for (size_t i = 0; i < r.plans.size(); ++i) plans.push_back(plan_json(r.plans[i], r.why[i]));
    doc["plans"] = plans;
    print_json(doc);
  } else {
    print_table(job, cluster, r);
  }
  return r.any_fits ? 0 : 1;
}

}  // namespace shardlab::cli
