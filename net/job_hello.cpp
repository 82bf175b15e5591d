#include "net/job_hello.h"

#include <unistd.h>

#include "engine/launch/job_topology.h"

namespace shardlab::net {

Hello hello_for(const JobSpec& job, int rank) {
  const Topology topo = launch::job_topology(job);
  const Coord c = topo.coord(rank);
  Hello h;
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

}  // namespace shardlab::net
