#include "engine/plan/plan_inputs.h"

#include <nlohmann/json.hpp>

#include "engine/plan/layout_as_job.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "engine/core/error.h"

namespace shardlab::plan {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

// Reads the fields by name; messages name them with the front end's prefix.
struct Reader {
  const FieldGetter& get;
  const std::string& prefix;

  std::string flag(std::string_view name) const { return prefix + std::string(name); }

  std::optional<int64_t> integer(std::string_view name, int64_t lo, int64_t hi) const {
    const std::optional<std::string> v = get(name);
    if (!v) return std::nullopt;
    int64_t out = 0;
    const char* end = v->data() + v->size();
    const auto [ptr, ec] = std::from_chars(v->data(), end, out);
    SL_ENFORCE(!v->empty() && ec == std::errc() && ptr == end,
               "{}: must be a whole number, got '{}'", flag(name), *v);
    SL_ENFORCE(out >= lo && out <= hi, "{}: must be in [{}, {}], got {}", flag(name), lo, hi, out);
    return out;
  }
  int64_t required(std::string_view name, int64_t hi, std::optional<int64_t> fallback) const {
    if (const std::optional<int64_t> v = integer(name, 1, hi)) return *v;
    SL_ENFORCE(fallback.has_value(), "{} is required", flag(name));
    return *fallback;
  }
  std::optional<int> small(std::string_view name, int64_t lo, int64_t hi) const {
    const std::optional<int64_t> v = integer(name, lo, hi);
    return v ? std::optional<int>(static_cast<int>(*v)) : std::nullopt;
  }
  bool on(std::string_view name) const {
    const std::optional<std::string> v = get(name);
    return v && *v != "0" && *v != "false";
  }
};

nlohmann::ordered_json memory_json(const MemoryBreakdown& m) {
  const auto g = [](double b) { return std::round(b / kGiB * 100) / 100; };
  return {{"params", g(m.params)},
          {"grads", g(m.grads)},
          {"optimizer_state", g(m.optimizer_state)},
          {"activations", g(m.activations)},
          {"comm", g(m.comm)},
          {"total", g(m.total())}};
}

nlohmann::ordered_json plan_json(const Estimate& e, const std::string& why) {
  const Layout& l = e.layout;
  nlohmann::ordered_json stages = nlohmann::ordered_json::array();
  for (const MemoryBreakdown& m : e.stages) stages.push_back(memory_json(m));
  nlohmann::ordered_json j;
  j["layout"] = {{"pp", l.pp},
                 {"tp", l.tp},
                 {"dp", l.dp},
                 {"micro_batch", l.micro_batch},
                 {"zero", l.zero},
                 {"recompute", recompute_name(l.recompute)},
                 {"sequence_parallel", l.sequence_parallel},
                 {"interleave", l.interleave}};
  j["micro_batches"] = e.micro_batches;
  j["memory_gib_per_gpu"] = memory_json(e.memory);
  j["fullest_stage"] = e.fullest_stage;
  j["stage_gib"] = stages;
  j["usable_gib"] = std::round(e.usable_bytes / kGiB * 100) / 100;
  j["fits"] = e.fits;
  j["step_seconds"] = e.step_seconds;
  j["time_seconds"] = {{"compute", e.time.compute}, {"tp", e.time.tp},
                       {"pp", e.time.pp},           {"dp", e.time.dp},
                       {"bubble", e.time.bubble},   {"optimizer", e.time.optimizer}};
  j["tflops_per_gpu"] = e.tflops_per_gpu;
  j["hw_tflops_per_gpu"] = e.hw_tflops_per_gpu;
  j["mfu"] = e.mfu;
  j["why"] = why;
  // The layout as a job this machine runs (layout_as_job.h).
  LayoutAsJob as_job = layout_as_job(l, e.micro_batches);
  j["job"] = std::move(as_job.job);
  j["job_changes"] = as_job.changes;
  return j;
}

}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> p = [] {
    const std::string narayanan = "Narayanan et al. 2021, table 1";
    return std::vector<ModelPreset>{
        {"gpt3-175b", "Brown et al. 2020, table 2.1", {96, 12288, 96, 0, 2048, 51200}},
        {"megatron-1.7b", narayanan, {24, 2304, 24, 0, 2048, 51200}},
        {"megatron-7.5b", narayanan, {36, 4096, 32, 0, 2048, 51200}},
        {"megatron-39b", narayanan, {48, 8192, 64, 0, 2048, 51200}},
        {"megatron-145b", narayanan, {80, 12288, 96, 0, 2048, 51200}},
        {"megatron-530b", narayanan, {105, 20480, 128, 0, 2048, 51200}},
        {"megatron-1t", narayanan, {128, 25600, 160, 0, 2048, 51200}},
    };
  }();
  return p;
}

PlanInputs read_plan_inputs(const FieldGetter& get, const std::string& prefix,
                            std::optional<ClusterSpec> cluster) {
  const Reader r{get, prefix};
  PlanInputs in;
  std::optional<GptShape> preset;
  if (const std::optional<std::string> name = get("model"); name && *name != "gpt") {
    for (const ModelPreset& m : model_presets())
      if (m.name == *name) preset = m.shape;
    if (!preset) {
      std::vector<std::string> names{"gpt"};
      for (const ModelPreset& m : model_presets()) names.push_back(m.name);
      SL_THROW(InvalidArgument, "{}: must be one of {}, got '{}'", r.flag("model"),
               fmt::join(names, ", "), *name);
    }
  }
  const auto from = [&](int64_t GptShape::*field) {
    return preset ? std::optional<int64_t>((*preset).*field) : std::nullopt;
  };
  GptShape& g = in.job.model;
  g.layers = r.required("layers", 100000, from(&GptShape::layers));
  g.hidden = r.required("hidden", 1 << 20, from(&GptShape::hidden));
  g.heads = r.required("heads", 1 << 16, from(&GptShape::heads));
  g.ffn = r.integer("ffn", 1, 1 << 22).value_or(preset ? preset->ffn : 0);
  g.seq = r.required("seq", 1 << 24, from(&GptShape::seq));
  g.vocab = r.required("vocab", 1 << 24, from(&GptShape::vocab));
  if (cluster) {
    in.cluster = *cluster;
  } else {
    const std::optional<std::string> gpu = get("gpu");
    SL_ENFORCE(gpu.has_value(), "{} (one of {}) is required", r.flag("gpu"),
               fmt::join(gpu_names(), ", "));
    try {
      in.cluster = cluster_preset(*gpu);
    } catch (const InvalidArgument&) {
      SL_THROW(InvalidArgument, "{}: must be one of {}, got '{}'", r.flag("gpu"),
               fmt::join(gpu_names(), ", "), *gpu);
    }
    in.cluster.gpus_per_node = r.small("gpus-per-node", 1, 1024).value_or(in.cluster.gpus_per_node);
  }
  in.job.gpus = r.required("gpus", 1 << 20, std::nullopt);
  in.job.global_batch = r.required("global-batch", int64_t{1} << 30, std::nullopt);
  in.job.fp32_grads = r.on("fp32-grads");
  in.job.dp_overlap = !r.on("no-dp-overlap");
  SearchOptions& o = in.options;
  o.tp = r.small("tp", 1, 1 << 20);
  o.pp = r.small("pp", 1, 1 << 20);
  o.dp = r.small("dp", 1, 1 << 20);
  o.zero = r.small("zero", 0, 3);
  o.interleave = r.small("interleave", 1, 1024);
  o.micro_batch = r.integer("micro-batch", 1, 1 << 20);
  if (const std::optional<std::string> rc = get("recompute")) {
    try {
      o.recompute = parse_recompute(*rc);
    } catch (const InvalidArgument&) {
      SL_THROW(InvalidArgument, "{}: must be none, selective or full, got '{}'",
               r.flag("recompute"), *rc);
    }
  }
  if (r.on("sequence-parallel")) o.sequence_parallel = true;
  o.top = static_cast<size_t>(r.integer("top", 1, 1000).value_or(5));
  return in;
}

nlohmann::ordered_json plans_to_json(const PlanInputs& in, const PlanResult& r) {
  const GptShape& g = in.job.model;
  nlohmann::ordered_json doc;
  doc["model"] = {{"layers", g.layers},
                  {"hidden", g.hidden},
                  {"heads", g.heads},
                  {"ffn", g.ffn_width()},
                  {"seq", g.seq},
                  {"vocab", g.vocab},
                  {"parameters", gpt_parameters(g)}};
  doc["cluster"] = cluster_to_json(in.cluster);
  doc["gpus"] = in.job.gpus;
  doc["global_batch"] = in.job.global_batch;
  doc["searched"] = r.searched;
  doc["any_fits"] = r.any_fits;
  doc["left_out"] = left_out_text();
  nlohmann::ordered_json plans = nlohmann::ordered_json::array();
  for (size_t i = 0; i < r.plans.size(); ++i) plans.push_back(plan_json(r.plans[i], r.why[i]));
  doc["plans"] = plans;
  return doc;
}

}  // namespace shardlab::plan
