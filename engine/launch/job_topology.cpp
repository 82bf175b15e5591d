#include "engine/launch/job_topology.h"

#include <algorithm>

namespace shardlab::launch {

Topology job_topology(const JobSpec& job) {
  const ParallelConfig& p = job.parallel;
  const int world = p.strategy == "none" ? 1 : static_cast<int>(std::max<int64_t>(1, p.world_size));
  return uses_model_parallelism(p) ? Topology::make({p.pp, p.tp, p.dp}, world)
                                   : Topology::make({1, 1, world}, world);
}

}  // namespace shardlab::launch
