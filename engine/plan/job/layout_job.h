// A large job's layout (engine/plan/search.h) as a ShardLab job this machine runs: the same kind
// of layout (pipeline, tensor and data parallelism, the ZeRO stage, interleaving, micro-batches)
// at a scale of a few ranks on the threads backend, training the character GPT of
// resources/jobs/gpt-3d.json. What cannot keep its value is said in `changes`: each parallel
// degree above 2 becomes 2 (a dimension that is parallel stays parallel), ZeRO-3 with tensor or
// pipeline parallelism becomes zero2 (the engine's hybrid shards up to ZeRO-2), recomputation and
// sequence parallelism are left out (not in the CPU engine). The app's Plan tab opens it.
#pragma once

#include <string>
#include <vector>

#include "engine/job/job_spec.h"
#include "engine/plan/estimate.h"

namespace shardlab::plan {

struct ScaledJob {
  JobSpec job;                       // valid (validate() finds nothing)
  std::vector<std::string> changes;  // "pp 4 -> 2", "recompute selective: left out", ...
};

// `micro_batches`: the plan's m (Estimate::micro_batches). Throws InternalError should the job
// not validate (a bug: tst_plan_job maps every layout of a search).
ScaledJob job_for_layout(const Layout& layout, int64_t micro_batches);

}  // namespace shardlab::plan
