// The search over layouts of a large GPT job: every valid layout (estimate.h's layout_problem)
// for the choices the user left open, estimated and ranked (those that fit first, fastest first;
// when none fits, the least memory first), the best explained in words. 1,024 GPUs and a 96-layer
// model are some ten thousand estimates, well under a second.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/plan/estimate.h"

namespace shardlab::plan {

// A fixed value for each choice the user gave; the rest are searched.
struct SearchOptions {
  std::optional<int> pp, tp, dp, zero, interleave;
  std::optional<int64_t> micro_batch;
  std::optional<Recompute> recompute;
  std::optional<bool> sequence_parallel;
  int64_t max_micro_batch = 16;  // the micro-batches tried: 1, 2, 4, ... up to this
  int max_interleave = 8;
  size_t top = 5;
};

struct PlanResult {
  std::vector<Estimate> plans;   // the best `top`, best first
  std::vector<std::string> why;  // one sentence for each plan
  int64_t searched = 0;          // layouts estimated
  bool any_fits = false;
};

// InvalidArgument when a fixed choice cannot run at all (the layout_problem of the first
// candidate that has it), or when nothing is valid.
PlanResult search_plans(const PlanJob& job, const ClusterSpec& cluster, const SearchOptions& o);

}  // namespace shardlab::plan
