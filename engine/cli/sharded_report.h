// What `shardlab run` and `shardlab worker` print about a run: progress lines, the job header, and
// for a sharded run the summary with the per-rank memory table (measured beside planned).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/job/job_spec.h"
#include "engine/run/rank_runner.h"
#include "engine/train/trainer.h"

namespace shardlab::cli {

// Progress and eval lines (nothing when quiet).
TrainerCallbacks progress_printer(bool tokens, bool quiet);
// "job NAME: <model>, N parameters" and the data / optimizer / parallel lines.
void print_job_header(const JobSpec& job, const std::string& data_description, int64_t params);
// "summary: <why it stopped> | eval accuracy .. | N steps, times | throughput".
void print_summary_line(const JobSpec& job, const TrainResult& result, double total_seconds);
// The summary line and the per-rank memory table.
void print_sharded_summary(const JobSpec& job, const ParallelRunResult& run, double total_seconds);
// RankRunOptions::on_checkpoint printing "checkpoint: step N saved to DIR" (nothing when quiet).
std::function<void(const std::string&, int64_t)> checkpoint_printer(bool quiet);
// --resume DIR: checks up front that the job can resume and DIR holds a complete checkpoint
// (one clear error otherwise: a sharded strategy, the manifest readable and, with
// `verify_shards`, every shard's size and checksum) and returns the line
// "resume: step N of <step dir> (...)" to print.
std::string check_resume(const JobSpec& job, const std::string& dir, bool verify_shards = false);
}  // namespace shardlab::cli
