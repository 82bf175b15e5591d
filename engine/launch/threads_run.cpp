#include "engine/launch/threads_run.h"

#include <fmt/format.h>

#include "engine/launch/compute_threads.h"
#include "engine/launch/slow_ranks.h"
#include "engine/run/device_training.h"

namespace shardlab::launch {

ParallelRunResult run_threads(const PreparedJob& prepared, const RankRunOptions& options) {
  use_compute_threads(prepared.job);
  RankRunOptions opts = options;
  opts.comm_topology = prepared.comm_topology();
  // A cuda job with a GPU per rank moves device memory over NCCL (engine/run/device_training.h).
  if (!opts.device_comm) opts.device_comm = nccl_device_comm(prepared.job, prepared.comm);
  if (opts.slow_ranks.empty()) opts.slow_ranks = slow_ranks_from_environment();
  return run_threads_job(prepared.job, prepared.data, prepared.comm, opts);
}

std::shared_ptr<TeachingGate> teaching_gate(const JobSpec& job) {
  if (!job.telemetry.teaching) return nullptr;
  return std::make_shared<TeachingGate>(
      TeachingOptions{static_cast<int>(job.parallel.world_size), job.telemetry.teaching_timeout_s});
}

ThreadsRun::ThreadsRun(PreparedJob prepared,
                       std::function<telemetry::TelemetrySink*(int)> telemetry)
    : teaching_(teaching_gate(prepared.job)) {
  thread_ =
      std::thread([this, p = std::move(prepared), telemetry = std::move(telemetry)]() mutable {
        try {
          load_data(p);
          RankRunOptions options;
          options.telemetry = telemetry;
          options.stop = &stop_;
          options.teaching = teaching_;
          const ParallelRunResult run = run_threads(p, options);
          const TrainResult& r = run.result;
          message_ =
              r.stopped_early
                  ? fmt::format("stopped after {} steps ({}): {} ranks, {:.1f} s of training",
                                r.steps, r.stop_reason, run.ranks.size(), r.train_seconds)
                  : fmt::format("finished: {} ranks, {} steps, {:.1f} s of training",
                                run.ranks.size(), r.steps, r.train_seconds);
          ok_ = true;
        } catch (const std::exception& e) {
          message_ = e.what();
        } catch (...) {
          message_ = "unknown error";
        }
        done_ = true;
      });
}

ThreadsRun::~ThreadsRun() {
  stop();
  join();
}

void ThreadsRun::stop() {
  stop_.request();
  if (teaching_) teaching_->close();  // held ranks go on to the step's end, and stop there
}

void ThreadsRun::join() {
  if (thread_.joinable()) thread_.join();
}

}  // namespace shardlab::launch
