#include "engine/launch/hello.h"

#include <unistd.h>

#include <algorithm>

namespace shardlab::launch {

Topology job_topology(const JobSpec& job) {
  const ParallelConfig& p = job.parallel;
  const int world = p.strategy == "none" ? 1 : static_cast<int>(std::max<int64_t>(1, p.world_size));
  return uses_model_parallelism(p) ? Topology::make({p.pp, p.tp, p.dp}, world)
                                   : Topology::make({1, 1, world}, world);
}

net::Hello hello_for(const JobSpec& job, int rank) {
  const Topology topo = job_topology(job);
  const Coord c = topo.coord(rank);
  net::Hello h;
  h.job_id = job.name;
  h.rank = rank;
  h.world = topo.world();
  h.pp = topo.pp();
  h.tp = topo.tp();
  h.dp = topo.dp();
  h.pp_i = c.pp;
  h.tp_i = c.tp;
  h.dp_i = c.dp;
  h.pid = static_cast<int64_t>(getpid());
  char host[256] = {0};
  h.host = gethostname(host, sizeof host - 1) == 0 ? host : "localhost";
  return h;
}

}  // namespace shardlab::launch
