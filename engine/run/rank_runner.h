// Running a sharded job: every rank of a communicator builds its ShardedOptimizer from the job,
// trains, and reports what it held; a threads world runs all ranks in this process. The launch
// layer (engine/launch/prepared_job.h) prepares a job once (its data, completed model, topology
// and communication options) and hands it to these entry points; nothing here derives them again.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/core/memory.h"
#include "engine/data/datasets.h"
#include "engine/job/job_spec.h"
#include "engine/plan/memory/planner.h"
#include "engine/telemetry/sink.h"
#include "engine/telemetry/teaching_gate.h"
#include "engine/topology/topology.h"
#include "engine/train/stop_request.h"
#include "engine/train/trainer.h"

namespace shardlab {

class Device;

struct RankReport {
  int rank = 0;
  MemorySnapshot memory;    // current: after the last training step (steady); peak: whole run
  MemoryPlan plan;          // what the planner predicts for this rank
  double comm_seconds = 0;  // summed duration of this rank's collectives
  int64_t comm_ops = 0;
  // pp x tp x dp jobs: this rank's pipeline stage and its busy/idle time over the run.
  int stage = 0;
  double pipeline_busy = 0, pipeline_idle = 0;
};

struct ParallelRunResult {
  TrainResult result;             // rank 0's (identical figures on every rank)
  std::vector<RankReport> ranks;  // every rank, in rank order
};

// Sums collective time and count per world rank from the records a communicator reports;
// install it as CommOptions::sink when creating the world. Records of the groups a topology builds
// (tp[i], pp[i], dp[i]) count for their world rank when the sink knows the topology.
class CommTotalsSink : public CommSink {
 public:
  explicit CommTotalsSink(int world, std::optional<Topology> topology = std::nullopt);
  void on_record(const CommRecord& record) override;
  double seconds(int rank) const;
  int64_t ops(int rank) const;

 private:
  std::optional<Topology> topology_;
  mutable std::mutex mu_;
  std::vector<double> seconds_;
  std::vector<int64_t> ops_;
};

// A CommTotalsSink for `world` ranks of a job with this parallel configuration (knowing its
// topology when it uses pp or tp).
std::shared_ptr<CommTotalsSink> make_comm_totals(const ParallelConfig& parallel, int world);

// `sink`, plus (when `telemetry` is set) a CommTelemetrySink publishing every record on its world
// rank's telemetry sink; install the result as CommOptions::sink when making the world.
std::shared_ptr<CommSink> with_comm_telemetry(
    std::shared_ptr<CommSink> sink, std::function<telemetry::TelemetrySink*(int)> telemetry,
    const ParallelConfig& parallel, int world);
// The same with the topology given: the job's when it uses pp or tp, else none (the records of
// the world communicator name their world rank themselves).
std::shared_ptr<CommSink> with_comm_telemetry(
    std::shared_ptr<CommSink> sink, std::function<telemetry::TelemetrySink*(int)> telemetry,
    std::optional<Topology> topology);

// The communication options of a job's world: every wait bounded by parallel.timeout_s. The one
// place a job becomes CommOptions (launch::PreparedJob::comm holds them for a run).
CommOptions job_comm_options(const ParallelConfig& parallel);

// Publishes a JOB_STATE event of world rank `rank` on `sink` (nothing when null): how every rank,
// and a single-process run (engine/launch/job_state.h), say they start, run, finish or fail.
void publish_job_state(telemetry::TelemetrySink* sink, int rank, telemetry::JobState state,
                       std::string reason = {});

struct RankRunOptions {
  // Called on rank 0 only; callbacks.should_stop must be null (a stop asked on one rank would
  // leave the others waiting in their collectives): use `stop`.
  TrainerCallbacks callbacks;
  // The sink the world's communicators report to, for RankReport's comm figures (may be null).
  std::shared_ptr<CommTotalsSink> comm_totals;
  // When set, the trained model is written there (save_model) at the end.
  std::string save_model_path;
  // Each rank's telemetry sink by world rank (null, or returning null: none). A rank publishes its
  // job state (starting, running, finished, or failed with the reason), every step with its memory
  // ledger, every evaluation (EvalEvent: the same global figures on every rank), and its compute
  // phases (forward and backward per micro-batch, optimizer per step: OptimizeInput::telemetry);
  // collective events come from the communicator's sink (comm_telemetry.h), which
  // run_threads_job installs when this is set.
  std::function<telemetry::TelemetrySink*(int rank)> telemetry;
  // When set, every rank asks it before each step (TrainerCallbacks::should_stop), so after
  // stop->request() all ranks stop after the same step: the run ends normally (job state
  // finished, reports gathered, the model saved when asked) with result.stopped_early and
  // "stopped at the user's request after N steps", without a final evaluation. Shared by all the
  // ranks of a threads job; must outlive the run. (Ranks in separate processes would each need
  // their own, agreeing, answers.)
  StopRequest* stop = nullptr;
  // When set, every rank resumes from this checkpoint before training (a checkpoint directory:
  // its latest complete step; or one step directory): the manifest must name this job's model,
  // optimizer and batch size (InvalidArgument naming what differs otherwise); its strategy, world
  // size and pp x tp x dp may differ (resharding, rank_checkpoint.h). Every rank reads its
  // parameters and optimizer state from the shards that hold them, then training continues to
  // train.steps. Any problem on any rank fails every rank with the same error, before any step.
  std::string resume_from;
  // Called on rank 0 after a resume, with the checkpoint's step and its resharding ("" when it
  // was written on this layout; else e.g. "zero2 on 4 ranks (1x1x4) -> fsdp on 2 ranks (1x1x2)").
  std::function<void(int64_t step, const std::string& resharding)> on_resume;
  // Called on rank 0 once a checkpoint is complete (job.train.checkpoint_dir), with its step
  // directory and step.
  std::function<void(const std::string& step_dir, int64_t step)> on_checkpoint;
  // run_threads_job: the topology of a job that uses pp or tp as the launch layer prepared it
  // (launch::PreparedJob::comm_topology()), to map the communicators' records to world ranks;
  // unset: made from the job.
  std::optional<Topology> comm_topology;
  // Teaching mode (engine/telemetry/teaching_gate.h): every rank waits at this gate after each
  // phase it publishes (so only with `telemetry`). One gate for all the ranks of a threads job;
  // null: nothing waits. A rank that fails closes it, so the others are not left held.
  std::shared_ptr<TeachingGate> teaching;
  // Ranks slowed on purpose (engine/train/slowdown.h's format, e.g. "5:3000"; "" none). The
  // launch layer fills it from SHARDLAB_SLOW_RANKS (engine/launch/slow_ranks.h).
  std::string slow_ranks;
  // When set (a job on a device, 1-D strategies), every rank calls it once its device exists, with
  // the rank's communicator and device, for a communicator that moves that device's memory itself
  // (make_nccl_world: one GPU per rank); the strategy's collectives on device memory go over it
  // (ShardedOptions::device_comm). Collective. It is destroyed before the optimizer, so whatever
  // it still has queued settles before the device buffers it reads are freed.
  std::function<std::unique_ptr<Communicator>(Communicator& comm, Device& device)> device_comm;
};

// One rank: binds a fresh MemoryLedger to this thread, builds the sharded optimizer from `job`
// (job.parallel.strategy must not be "none"; HybridShardedOptimizer when the job uses pp or tp,
// ShardedOptimizer otherwise), resumes it (options.resume_from), runs it on `data` and returns
// this rank's result with every rank's report (gathered over `comm`). With
// job.train.checkpoint_dir set, every rank saves its state there (rank_checkpoint.h) after every
// train.checkpoint_every steps and after the run's last step. Collective.
ParallelRunResult run_rank(const JobSpec& job, Communicator& comm, const Datasets& data,
                           const RankRunOptions& options = {});

// All job.parallel.world_size ranks as threads of this process, sharing `data`, their world made
// with `comm_options` (its sink replaced by the run's comm totals and the ranks' telemetry).
ParallelRunResult run_threads_job(const JobSpec& job, const Datasets& data,
                                  const CommOptions& comm_options, const RankRunOptions& options);
// The same with job_comm_options(job.parallel).
ParallelRunResult run_threads_job(const JobSpec& job, const Datasets& data,
                                  const RankRunOptions& options = {});

}  // namespace shardlab
