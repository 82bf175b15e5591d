// shardlab plan: a large GPT job's layouts on a cluster, estimated and ranked (engine/plan), as a
// table or one JSON document (fields: command_table.cpp). The searching and the formulas live in
// engine/plan; this file reads the flags and prints.
#include <fmt/format.h>

#include "engine/cli/args.h"
#include "engine/cli/command_spec.h"
#include "engine/cli/commands.h"
#include "engine/cli/json_output.h"
#include "engine/cli/plan_job.h"
#include "engine/plan/plan_inputs.h"

namespace shardlab::cli {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

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
  if (args.has("--calibrate-mpi-inner")) return plan_calibrate_mpi_inner(args);
  if (args.has("--calibrate")) return plan_calibrate(args);
  if (args.has("--job")) return plan_job(args);
  if (args.has("--set")) SL_THROW(UsageError, "plan: --set goes with --job");
  if (args.has("--out")) SL_THROW(UsageError, "plan: --out goes with --calibrate");
  if (args.has("--links")) SL_THROW(UsageError, "plan: --links goes with --calibrate");
  if (args.has("--gpu") && args.has("--cluster"))
    SL_THROW(UsageError, "plan: give --gpu or --cluster, not both");
  std::optional<plan::ClusterSpec> file;
  if (args.has("--cluster")) file = plan::load_cluster_file(args.get("--cluster"));
  const plan::FieldGetter get = [&](std::string_view name) -> std::optional<std::string> {
    const std::string flag = "--" + std::string(name);
    if (!args.has(flag)) return std::nullopt;
    return args.get(flag);
  };
  if (args.has("--print-cluster")) {
    plan::ClusterSpec c = file ? *file : plan::cluster_preset(args.get("--gpu", "a100-80gb"));
    if (!file) c.gpus_per_node = static_cast<int>(args.get_int("--gpus-per-node", 8, 1, 1024));
    print_json(plan::cluster_to_json(c));
    return 0;
  }
  const plan::PlanInputs in = plan::read_plan_inputs(get, "--", file);
  const plan::PlanResult r = plan::search_plans(in.job, in.cluster, in.options);
  if (args.has("--json"))
    print_json(plan::plans_to_json(in, r));
  else
    print_table(in.job, in.cluster, r);
  return r.any_fits ? 0 : 1;
}

}  // namespace shardlab::cli
