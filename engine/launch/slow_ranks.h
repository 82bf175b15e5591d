// Ranks slowed on purpose (engine/train/slowdown.h): SHARDLAB_SLOW_RANKS, read where a job becomes
// a run, for RankRunOptions::slow_ranks. An environment variable rather than an option so that it
// reaches every rank however it starts: threads of `shardlab run` or the app, and the workers
// mpirun, srun or the hosts launcher start (each reads its own environment).
#pragma once

#include <string>

namespace shardlab::launch {

// SHARDLAB_SLOW_RANKS as it is set ("" when unset); checked when a rank reads its entry.
std::string slow_ranks_from_environment();

}  // namespace shardlab::launch
