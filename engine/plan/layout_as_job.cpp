#include "engine/plan/layout_as_job.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace shardlab::plan {
namespace {

// At most 2, said when it changes.
int64_t scaled(const char* name, int64_t value, std::vector<std::string>& changes) {
  const int64_t s = std::min<int64_t>(value, 2);
  if (s != value) changes.push_back(fmt::format("{} {} -> {}", name, value, s));
  return s;
}

}  // namespace

LayoutAsJob layout_as_job(const Layout& layout, int64_t micro_batches) {
  LayoutAsJob out;
  std::vector<std::string>& changes = out.changes;
  const int64_t pp = scaled("pp", layout.pp, changes);
  const int64_t tp = scaled("tp", layout.tp, changes);
  const int64_t dp = scaled("dp", layout.dp, changes);
  const int64_t v = pp > 1 ? scaled("interleave", layout.interleave, changes) : 1;
  if (pp == 1 && layout.interleave > 1)
    changes.push_back(fmt::format("interleave {} -> 1", layout.interleave));
  // Micro-batches: at most 4 of 4 sequences each; a multiple of pp when interleaved.
  int64_t m = std::clamp<int64_t>(micro_batches, 1, 4);
  if (v > 1) m = std::max<int64_t>(pp, m / pp * pp);
  if (m != micro_batches)
    changes.push_back(fmt::format("micro-batches {} -> {}", micro_batches, m));
  const int64_t mb = 4;
  if (layout.micro_batch != mb)
    changes.push_back(fmt::format("micro-batch {} -> {} sequences", layout.micro_batch, mb));
  const bool hybrid = pp > 1 || tp > 1;
  std::string strategy;
  switch (layout.zero) {
    case 0:
      strategy = "ddp";
      break;
    case 1:
      strategy = "zero1";
      break;
    case 2:
      strategy = "zero2";
      break;
    default:
      strategy = hybrid ? "zero2" : "fsdp";
      break;
  }
  if (layout.zero == 3 && hybrid)
    changes.push_back("ZeRO-3 -> zero2 (the engine shards up to ZeRO-2 with tp or pp)");
  if (!hybrid && dp == 1) strategy = "none";
  if (layout.recompute != Recompute::none)
    changes.push_back(fmt::format("recompute {}: left out (not in the CPU engine)",
                                  recompute_name(layout.recompute)));
  if (layout.sequence_parallel)
    changes.push_back("sequence parallelism: left out (not in the CPU engine)");

  nlohmann::ordered_json doc = {
      {"name", fmt::format("plan-pp{}-tp{}-dp{}-{}", pp, tp, dp, strategy)},
      {"model",
       {{"kind", "gpt"},
        {"seed", 1},
        {"gpt",
         {{"context", 64},
          {"width", 64},
          {"layers", std::max<int64_t>(2, 2 * pp * v)},
          {"heads", 4},
          {"mlp_ratio", 4}}}}},
      {"data",
       {{"dataset", "chars"}, {"corpus", nlohmann::ordered_json::array()}, {"eval_fraction", 0.1}}},
      {"optimizer", {{"name", "adamw"}, {"lr", 0.003}, {"weight_decay", 0.1}}},
      {"train",
       {{"steps", 200},
        {"batch_size", dp * m * mb},
        {"log_every", 25},
        {"eval_every", 100},
        {"eval_batches", 20},
        {"schedule", {{"kind", "warmup_cosine"}, {"warmup_steps", 20}, {"min_lr_ratio", 0.1}}}}},
  };
  if (strategy != "none") {
    nlohmann::ordered_json par = {
        {"strategy", strategy}, {"world_size", pp * tp * dp}, {"backend", "threads"}};
    if (hybrid) {
      par["pp"] = pp, par["tp"] = tp, par["dp"] = dp, par["micro_batches"] = m;
      if (pp > 1) par["schedule"] = v > 1 ? "interleaved" : "1f1b";
      if (v > 1) par["pp_chunks"] = v;
    } else if (m > 1) {
      doc["train"]["accumulation_steps"] = m;
    }
    doc["parallel"] = par;
  }
  out.job = std::move(doc);
  return out;
}

}  // namespace shardlab::plan
