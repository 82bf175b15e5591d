#include "engine/launch/prepared_job.h"

#include <unistd.h>

#include "engine/job/build.h"
#include "engine/launch/job_topology.h"
#include "engine/run/rank_runner.h"

namespace shardlab::launch {

std::optional<Topology> PreparedJob::comm_topology() const {
  if (!uses_model_parallelism(job.parallel)) return std::nullopt;
  return topology;
}

net::Hello PreparedJob::hello(int rank) const {
  const Coord c = topology.coord(rank);
  net::Hello h;
  h.job_id = job.name;
  h.rank = rank;
  h.world = topology.world();
  h.pp = topology.pp();
  h.tp = topology.tp();
  h.dp = topology.dp();
  h.pp_i = c.pp;
  h.tp_i = c.tp;
  h.dp_i = c.dp;
  h.pid = static_cast<int64_t>(getpid());
  char host[256] = {0};
  h.host = gethostname(host, sizeof host - 1) == 0 ? host : "localhost";
  return h;
}

PreparedJob plan_job(const JobSpec& job) {
  return PreparedJob{job, job_topology(job), job_comm_options(job.parallel), Datasets{}};
}

void load_data(PreparedJob& prepared) {
  if (prepared.has_data()) return;
  prepared.data = load_completed_data(prepared.job);
}

PreparedJob prepare_job(const JobSpec& job) {
  PreparedJob prepared = plan_job(job);
  load_data(prepared);
  return prepared;
}

}  // namespace shardlab::launch
