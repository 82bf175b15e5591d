#include "engine/sharding/sharded_options_from_job.h"

namespace shardlab {

ShardedOptions sharded_options(const JobSpec& job) {
  ShardedOptions o;
  o.sharding = job.parallel;
  o.model = job.model;
  o.optimizer = job.optimizer;
  o.train = job.train;
  return o;
}

}  // namespace shardlab
