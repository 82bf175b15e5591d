// A large job's layout (engine/plan/search.h) as a ShardLab job this machine runs: the same kind
// of layout (pipeline, tensor and data parallelism, the ZeRO stage, interleaving, micro-batches)
// at a scale of a few ranks on the threads backend, training the character GPT of
// resources/jobs/gpt-3d.json. What cannot keep its value is said in `changes`: each parallel
// degree above 2 becomes 2 (a dimension that is parallel stays parallel), ZeRO-3 with tensor or
// pipeline parallelism becomes zero2 (the engine's hybrid shards up to ZeRO-2), recomputation and
// sequence parallelism are left out (not in the CPU engine). A job file's JSON (engine/job reads
// it; tst_plan_job checks that every layout of a search gives a valid job that runs): `shardlab
// plan --json` and /api/plan carry it with each plan, the app's "Open as job" and the page's
// "Download as job" use it.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/plan/estimate.h"

namespace shardlab::plan {

struct LayoutAsJob {
  nlohmann::ordered_json job;        // a job file's document
  std::vector<std::string> changes;  // "pp 4 -> 2", "recompute selective: left out", ...
};

// `micro_batches`: the plan's m (Estimate::micro_batches).
LayoutAsJob layout_as_job(const Layout& layout, int64_t micro_batches);

}  // namespace shardlab::plan
