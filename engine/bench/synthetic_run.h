// A synthetic run for `shardlab bench web`: ranks in a pp 2 x tp 2 x dp (R/4) layout whose steps
// (phases, two collectives, memory, the step) are added straight to a RunModel, so the dashboard's
// frames can be timed for any number of ranks without training.
#pragma once

#include <cstdint>

#include "net/protocol.h"
#include "net/run_model.h"

namespace shardlab::bench {

// A rank's HELLO in a pp 2 x tp 2 x dp (R/4) layout.
net::Hello hello_of(int rank, int world);

// One synthetic step of `rank` ending at `t`: phases, two collectives, memory, the step.
void add_step(net::RunModel& model, int rank, int world, int64_t step, double t,
              double step_seconds);

// A model holding `ranks` ranks that have each done a few (5) steps.
void populate(net::RunModel& model, int ranks);

}  // namespace shardlab::bench
