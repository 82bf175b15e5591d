// What a plan is asked for, read by name from any front end: the `shardlab plan` flags (prefix
// "--"), the web dashboard's /api/plan query (prefix "") and the app's Plan tab all give the same
// fields, and this is the one place that knows them, their ranges and what is searched when one
// is left out:
//   model      model (a preset name: model_presets()) or layers, hidden, heads, [ffn], seq, vocab
//              (given fields override the preset's)
//   cluster    gpu (gpu_names()) [gpus-per-node]; the CLI also takes a cluster file
//   job        gpus, global-batch, [fp32-grads], [no-dp-overlap]
//   layout     [micro-batch] [tp] [pp] [dp] [zero] [recompute] [sequence-parallel] [interleave]
//              (left out: searched) [top]
// Errors: InvalidArgument naming the field with its prefix ("--layers is required").
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "engine/plan/search.h"

namespace shardlab::plan {

struct ModelPreset {
  std::string name;    // "gpt3-175b"
  std::string source;  // where its sizes come from
  GptShape shape;
};
// GPT-3 175B (Brown et al. 2020) and the rows of Narayanan et al. 2021 table 1.
const std::vector<ModelPreset>& model_presets();

struct PlanInputs {
  PlanJob job;
  ClusterSpec cluster;
  SearchOptions options;
};

// `get(name)`: the field's value as text, nullopt when absent; a switch gives "" or "1"/"true"
// ("0"/"false" turns it off). `cluster`: when set (a --cluster file), gpu and gpus-per-node are
// not read.
using FieldGetter = std::function<std::optional<std::string>(std::string_view name)>;
PlanInputs read_plan_inputs(const FieldGetter& get, const std::string& prefix,
                            std::optional<ClusterSpec> cluster = std::nullopt);

// The answer as one JSON document (`shardlab plan --json`, /api/plan): model, cluster, gpus,
// global_batch, searched, any_fits, left_out, plans [...] (fields: engine/cli/command_table.cpp).
nlohmann::ordered_json plans_to_json(const PlanInputs& in, const PlanResult& r);

}  // namespace shardlab::plan
