// A job's pp x tp x dp topology as its ranks are launched: what the app's grid draws and what each
// rank announces in its HELLO (launch::PreparedJob::hello, prepared_job.h).
#pragma once

#include "engine/job/job_spec.h"
#include "engine/topology/topology.h"

namespace shardlab::launch {

// The job's topology over its world (1 x 1 x world for the 1-D strategies; one rank for strategy
// "none"). Throws InvalidArgument as Topology::make does for a bad layout.
Topology job_topology(const JobSpec& job);

}  // namespace shardlab::launch
