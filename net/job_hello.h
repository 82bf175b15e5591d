// The HELLO a rank of a job announces itself with: its coordinates in the job's topology
// (engine/launch/job_topology.h), host and pid. Used by `shardlab run`/`worker` (recordings,
// collectors) and by the app for the ranks it runs in-process.
#pragma once

#include "engine/job/job_spec.h"
#include "net/protocol.h"

namespace shardlab::net {

// HELLO for world rank `rank` of `job`, from this process (host name, pid).
Hello hello_for(const JobSpec& job, int rank);

}  // namespace shardlab::net
