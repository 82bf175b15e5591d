// The planner on the web server: GET /api/plan?FIELD=VALUE&... answers `shardlab plan --json` for
// the same fields (engine/plan/plan_inputs.h reads them, without the "--"; at most 20 plans), and
// GET /api/plan/presets the choices a form offers (model presets with their sizes, GPUs). Bad input
// is 400 with {"error": "<the planner's message>"}.
#pragma once

#include <string>
#include <string_view>

namespace shardlab::net {

struct PlanApiReply {
  int status = 200;  // 200 or 400
  std::string json;
};

// `target`: the request target, path and query ("/api/plan?model=gpt3-175b&gpus=1024&...").
PlanApiReply plan_api(std::string_view target);
std::string plan_presets_json();

}  // namespace shardlab::net
