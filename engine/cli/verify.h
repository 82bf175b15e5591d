// `shardlab run --verify`: the same job in one process without sharding, compared parameter by
// parameter with a sharded run's result.
#pragma once

#include <span>
#include <string>

#include "engine/job/job_spec.h"

namespace shardlab::cli {

// --tolerance's value: a positive finite number, the whole string (UsageError otherwise).
double parse_tolerance(const std::string& text);
// max |a - b| / max |b|.
double max_rel_diff(std::span<const float> a, std::span<const float> b);
// Runs the job in one process without sharding (a cuda job: on one GPU) and compares its final
// parameters with `sharded`; prints "verify: max_rel_diff=<x> tolerance=<t> OK|FAIL" and returns
// whether OK.
bool verify_against_single_process(const JobSpec& job, std::span<const float> sharded,
                                   double tolerance);

}  // namespace shardlab::cli
