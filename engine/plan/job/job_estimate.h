// A ShardLab job (a job file, as `shardlab run` trains it) predicted on a machine measured by
// `shardlab plan --calibrate`: every rank's memory by the engine's own memory planner
// (engine/plan/memory/planner.h, which the run's ledger equals), and the step time composed from the
// measured costs of the kernels each rank runs (job_work.h), its collectives on the measured
// link, the pipeline's bubble, and the sharing of cores:
//
//   rank work     its micro-batches' forward and backward, its optimizer update on the elements
//                 it owns, and its collectives' data movement (the threads backend copies and
//                 reduces on the ranks' own cores: a ring all-reduce moves 2(n-1)/n of the
//                 buffer over the bus bandwidth, a reduce-scatter or all-gather (n-1)/n), plus
//                 the measured cost of each meeting (a collective per bucket, parallel.bucket_mb,
//                 or FSDP block; a pipeline send) at this job's ranks per core
//                 (CpuOpCosts::sync); the kernels and the update are scaled by the in-step factor
//                 (CpuOpCosts::in_step).
//   critical path the slowest rank's work with the pipeline's bubble: 1F1B (and GPipe) idle
//                 (p-1) micro-batch times of the slowest stage, interleaving (p-1)/v.
//   cores         ranks are threads (or processes) on this host's cores: when there are more
//                 ranks than cores the step takes at least the summed work of all ranks over the
//                 cores; the step is the larger of that and the critical path.
//
// Left out (said in the output): the data loader's shuffling, evaluation, logging and telemetry,
// memory allocation and page faults, and the operating system's scheduling beyond a fair share.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "engine/core/memory.h"
#include "engine/job/job_spec.h"
#include "engine/plan/hardware.h"

namespace shardlab::plan {

struct JobTime {  // seconds per step; they add up to the step
  double compute = 0, tp = 0, pp = 0, dp = 0, bubble = 0, optimizer = 0;
  double total() const { return compute + tp + pp + dp + bubble + optimizer; }
};

struct JobEstimate {
  int ranks = 1;
  int cores = 1;                      // the cluster's gpus_per_node: a calibrated machine's cores
  std::vector<MemoryFigures> memory;  // by world rank, steady state (the planner's)
  std::string memory_formula;         // rank 0's
  JobTime time;                       // the step split into its parts
  double step_seconds = 0;
  double critical_path_seconds = 0;  // the slowest rank, bubble included
  double cores_bound_seconds = 0;    // every rank's work over the cores
  bool bound_by_cores = false;
  double gemm_share = 0;      // of the ranks' summed compute, the GEMMs' part
  double in_step_factor = 1;  // CpuOpCosts::in_step_factor at this job's ranks per core
  std::string why;            // one sentence
};

// `job` is complete (a gpt job's vocabulary read from its corpus: launch::prepare_job). Throws
// InvalidArgument when the cluster has no cpu_ops ("measure this machine with shardlab plan
// --calibrate") or the job's device is not the CPU, and what the planners throw for a layout
// that does not resolve.
JobEstimate estimate_job(const JobSpec& job, const ClusterSpec& cluster);

// {"job", "ranks", "cores", "step_seconds", "time_seconds" {...}, "bound_by",
// "critical_path_seconds", "cores_bound_seconds", "gemm_share", "in_step_factor",
// "memory_bytes_by_rank" [{params, grads, optimizer_state}], "memory_formula", "why", "left_out"}.
nlohmann::ordered_json job_estimate_to_json(const JobSpec& job, const JobEstimate& e);

const char* job_left_out_text();

}  // namespace shardlab::plan
