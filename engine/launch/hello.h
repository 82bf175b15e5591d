// What a job's ranks announce about themselves: the job's topology and each rank's HELLO (its
// coordinates in that topology, host and pid). Shared by `shardlab run`/`worker` (engine/cli),
// which put it in recordings and send it to collectors, and the app (gui/), which does the same for
// the ranks it runs in-process and draws the grid from the topology.
#pragma once

#include "engine/job/job_spec.h"
#include "engine/parallel/topology.h"
#include "net/protocol.h"

namespace shardlab::launch {

// The job's pp x tp x dp topology over its world (1 x 1 x world for the 1-D strategies; one
// rank for strategy "none"). Throws InvalidArgument as Topology::make does for a bad layout.
Topology job_topology(const JobSpec& job);

// HELLO for world rank `rank` of `job`, from this process (host name, pid).
net::Hello hello_for(const JobSpec& job, int rank);

}  // namespace shardlab::launch
