#include "engine/launch/slow_ranks.h"

#include <cstdlib>

#include "engine/train/slowdown.h"

namespace shardlab::launch {

std::string slow_ranks_from_environment() {
  const char* env = std::getenv(kSlowRanksEnv);
  return env == nullptr ? std::string() : std::string(env);
}

}  // namespace shardlab::launch
