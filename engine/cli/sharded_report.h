// What `shardlab run` and `shardlab worker` print about a sharded run: progress callbacks, the
// per-rank memory table (measured beside planned) and the verify line.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "engine/job/job_spec.h"
#include "engine/parallel/rank_runner.h"
#include "engine/train/trainer.h"

namespace shardlab::cli {

// Progress and eval lines (nothing when quiet).
TrainerCallbacks progress_printer(bool tokens, bool quiet);
// "job NAME: <model>, N parameters" and the data / optimizer / parallel lines.
void print_job_header(const JobSpec& job, const std::string& data_description, int64_t params);
// The summary line and the per-rank memory table.
void print_sharded_summary(const JobSpec& job, const ParallelRunResult& run, double total_seconds);
// max |a - b| / max |b|.
double max_rel_diff(std::span<const float> a, std::span<const float> b);
// Runs the job in one process without sharding and compares its final parameters with
// `sharded`; prints "verify: max_rel_diff=<x> tolerance=<t> OK|FAIL" and returns whether OK.
bool verify_against_single_process(const JobSpec& job, std::span<const float> sharded,
                                   double tolerance);

}  // namespace shardlab::cli
