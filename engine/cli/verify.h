// `shardlab run --verify`: the same job in one process without sharding, compared parameter by
// parameter with a sharded run's result, against a tolerance measured on the job itself (the
// rule and why: engine/job/equivalence.h).
#pragma once

#include <span>
#include <string>

#include "engine/job/job_spec.h"

namespace shardlab::cli {

// --tolerance's value: a positive finite number, the whole string (UsageError otherwise).
double parse_tolerance(const std::string& text);
// Runs the job in one process without sharding (a cuda job: on one GPU) and compares its final
// parameters with `sharded` (max |a - b| / max |b|). The tolerance is `tolerance` when positive
// (--tolerance), otherwise equivalence_tolerance() of the noise floor, measured by running the
// job in one process again with its batch cut into micro-batches and reversed. Prints
// "verify: max_rel_diff=<x> tolerance=<t> (<what t is based on>) OK|FAIL" and returns whether OK;
// when the reordered runs disagree beyond kFloorCeiling, or training moved the parameters by less
// than kMinMovement times the tolerance, "verify: ... INCONCLUSIVE: <why>" and false (the command
// exits 1 for both FAIL and INCONCLUSIVE). Throws when the parameter counts differ.
bool verify_against_single_process(const JobSpec& job, std::span<const float> sharded,
                                   double tolerance);

}  // namespace shardlab::cli
