// A job file's sections as the ShardedOptions every sharded optimizer is built from: the one
// bridge between the job layer (engine/job) and the sharded-optimizer contract, kept out of
// sharded_optimizer_interface.h so that code written against the contract need not know job files.
#pragma once

#include "engine/job/job_spec.h"
#include "engine/sharding/sharded_optimizer_interface.h"

namespace shardlab {

// A job's parallel, model, optimizer and train sections as ShardedOptions.
ShardedOptions sharded_options(const JobSpec& job);

}  // namespace shardlab
