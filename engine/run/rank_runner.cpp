#include "engine/run/rank_runner.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "engine/checkpoint/rank_checkpoint.h"
#include "engine/comm/threads/world.h"
#include "engine/core/device.h"
#include "engine/core/error.h"
#include "engine/device/device.h"
#include "engine/run/comm_telemetry.h"
#include "engine/run/layout_telemetry.h"
#include "engine/run/seed_optimizers.h"
#include "engine/sharding/sharded_options_from_job.h"
#include "engine/strategies/strategies.h"
#include "engine/train/slowdown.h"
#include "engine/train/step_telemetry.h"

namespace shardlab {

CommTotalsSink::CommTotalsSink(int world, std::optional<Topology> topology)
    : topology_(std::move(topology)),
      seconds_(static_cast<size_t>(world), 0.0),
      ops_(static_cast<size_t>(world), 0) {}

void CommTotalsSink::on_record(const CommRecord& r) {
  const int rank =
      topology_ ? topology_->world_rank(r.group, r.rank) : (r.group == "world" ? r.rank : -1);
  if (rank < 0 || rank >= static_cast<int>(ops_.size())) return;
  std::lock_guard<std::mutex> lock(mu_);
  seconds_[static_cast<size_t>(rank)] += r.seconds();
  ++ops_[static_cast<size_t>(rank)];
}

double CommTotalsSink::seconds(int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  return rank >= 0 && rank < static_cast<int>(seconds_.size()) ? seconds_[static_cast<size_t>(rank)]
                                                               : 0.0;
}

int64_t CommTotalsSink::ops(int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  return rank >= 0 && rank < static_cast<int>(ops_.size()) ? ops_[static_cast<size_t>(rank)] : 0;
}

namespace {
// The topology the comm sinks map group records with: only a job that uses pp or tp has groups.
std::optional<Topology> comm_topology_of(const ParallelConfig& parallel, int world) {
  if (!uses_model_parallelism(parallel)) return std::nullopt;
  return Topology::make({parallel.pp, parallel.tp, parallel.dp}, world);
}
}  // namespace

std::shared_ptr<CommTotalsSink> make_comm_totals(const ParallelConfig& parallel, int world) {
  return std::make_shared<CommTotalsSink>(world, comm_topology_of(parallel, world));
}

std::shared_ptr<CommSink> with_comm_telemetry(
    std::shared_ptr<CommSink> sink, std::function<telemetry::TelemetrySink*(int)> telemetry,
    const ParallelConfig& parallel, int world) {
  if (!telemetry) return sink;
  return with_comm_telemetry(std::move(sink), std::move(telemetry),
                             comm_topology_of(parallel, world));
}

std::shared_ptr<CommSink> with_comm_telemetry(
    std::shared_ptr<CommSink> sink, std::function<telemetry::TelemetrySink*(int)> telemetry,
    std::optional<Topology> topology) {
  if (!telemetry) return sink;
  auto forward = std::make_shared<CommTelemetrySink>(std::move(telemetry), std::move(topology));
  return std::make_shared<TeeCommSink>(
      std::vector<std::shared_ptr<CommSink>>{std::move(sink), std::move(forward)});
}

CommOptions job_comm_options(const ParallelConfig& parallel) {
  CommOptions copts;
  copts.timeout =
      std::chrono::milliseconds(static_cast<int64_t>(std::llround(parallel.timeout_s * 1000)));
  return copts;
}

void publish_job_state(telemetry::TelemetrySink* sink, int rank, telemetry::JobState state,
                       std::string reason) {
  if (!sink) return;
  telemetry::Event e;
  e.rank = rank;
  e.time = telemetry::now_seconds();
  e.payload = telemetry::JobStateEvent{state, std::move(reason)};
  sink->publish(std::move(e));
}

namespace {

constexpr int kFields = 2 * kMemCategories + 6;

std::vector<RankReport> gather_reports(Communicator& comm, const RankReport& mine,
                                       const std::function<MemoryPlan(int rank)>& plan_of) {
  const int world = comm.size();
  std::vector<double> slots(static_cast<size_t>(kFields), 0.0);
  double* me = slots.data();
  for (int c = 0; c < kMemCategories; ++c) {
    me[c] = static_cast<double>(mine.memory.current.bytes[static_cast<size_t>(c)]);
    me[kMemCategories + c] = static_cast<double>(mine.memory.peak.bytes[static_cast<size_t>(c)]);
  }
  me[2 * kMemCategories] = static_cast<double>(mine.memory.peak_total);
  me[2 * kMemCategories + 1] = mine.comm_seconds;
  me[2 * kMemCategories + 2] = static_cast<double>(mine.comm_ops);
  me[2 * kMemCategories + 3] = mine.stage;
  me[2 * kMemCategories + 4] = mine.pipeline_busy;
  me[2 * kMemCategories + 5] = mine.pipeline_idle;
  const std::vector<double> all = parallel_detail::gather_over_ranks(comm, slots);
  std::vector<RankReport> reports(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    const double* v = all.data() + static_cast<size_t>(r * kFields);
    RankReport& rep = reports[static_cast<size_t>(r)];
    rep.rank = r;
    for (int c = 0; c < kMemCategories; ++c) {
      rep.memory.current.bytes[static_cast<size_t>(c)] = static_cast<int64_t>(v[c]);
      rep.memory.peak.bytes[static_cast<size_t>(c)] = static_cast<int64_t>(v[kMemCategories + c]);
    }
    rep.memory.peak_total = static_cast<int64_t>(v[2 * kMemCategories]);
    rep.comm_seconds = v[2 * kMemCategories + 1];
    rep.comm_ops = static_cast<int64_t>(v[2 * kMemCategories + 2]);
    rep.stage = static_cast<int>(v[2 * kMemCategories + 3]);
    rep.pipeline_busy = v[2 * kMemCategories + 4];
    rep.pipeline_idle = v[2 * kMemCategories + 5];
    rep.plan = plan_of(r);
  }
  return reports;
}

// Every rank loads its part of `from` into `opt` (resharding when the checkpoint was written on
// another strategy or layout); all or none. Rank 0 reports the resharding, if any.
void resume_rank(IShardedOptimizer& opt, Communicator& comm, const RankRunOptions& options) {
  const CheckpointManifest m = load_checkpoint(comm, opt, options.resume_from);
  if (opt.rank() == 0 && options.on_resume)
    options.on_resume(m.step, resharding(m, checkpoint_layout(opt)));
}

// Where `opt` starts: a checkpoint (options.resume_from), else a model file
// (job.train.init_model), else its seeded initialisation. All ranks or none.
void start_rank(IShardedOptimizer& opt, Communicator& comm, const JobSpec& job,
                const RankRunOptions& options) {
  if (!options.resume_from.empty())
    resume_rank(opt, comm, options);
  else if (!job.train.init_model.empty())
    agree_or_throw(comm, [&] { opt.load_model(job.train.init_model); });
}

// Trains `opt` and fills in what this rank held.
TrainResult train_rank(IShardedOptimizer& opt, Communicator& comm, const Datasets& data,
                       const RankRunOptions& options, const MemoryLedger& ledger, RankReport& mine,
                       telemetry::TelemetrySink* sink) {
  OptimizeInput in;
  const TrainConfig& t = opt.options().train;
  int64_t last_saved = -1;
  if (!t.checkpoint_dir.empty())
    in.after_step = [&](int64_t done, bool last) {
      if (done == last_saved ||
          !(last || (t.checkpoint_every > 0 && done % t.checkpoint_every == 0)))
        return;
      const std::string dir =
          save_checkpoint(comm, opt, t.checkpoint_dir, static_cast<int>(t.keep_checkpoints));
      last_saved = done;
      if (opt.rank() == 0 && options.on_checkpoint) options.on_checkpoint(dir, done);
    };
  in.train = data.train.get();
  in.eval = data.eval.get();
  if (opt.rank() == 0) in.callbacks = options.callbacks;
  // Every rank, not only rank 0: they must all stop after the same step.
  if (options.stop)
    in.callbacks.should_stop = [stop = options.stop](int64_t done) {
      return stop->should_stop(done);
    };
  in.telemetry = sink;
  in.slowdown = slowdown_for_rank(options.slow_ranks, opt.rank());
  add_step_telemetry(in.callbacks, sink, opt.rank(), opt.options().model.kind == "gpt", &ledger);
  TrainResult result = opt.optimize(in);
  if (!options.save_model_path.empty()) opt.save_model(options.save_model_path);
  mine.rank = opt.rank();
  mine.memory = opt.memory_after_last_step();
  mine.memory.peak = ledger.snapshot().peak;
  mine.memory.peak_total = ledger.snapshot().peak_total;
  mine.stage = opt.topology().coord(opt.rank()).pp;
  mine.pipeline_busy = opt.pipeline_times().busy;
  mine.pipeline_idle = opt.pipeline_times().idle;
  return result;
}

// What the planner predicts for every rank of `opt`'s job.
std::function<MemoryPlan(int)> plan_of_ranks(const JobSpec& job, const IShardedOptimizer& opt) {
  const int world = opt.world_size();
  if (!uses_model_parallelism(job.parallel)) {
    const MemoryPlan plan = plan_memory(opt.full_layout(), job.optimizer, job.parallel, world);
    return [plan](int) { return plan; };  // the same formula for every rank
  }
  // The plan depends on the stage and the tp slice only: one per (pp_i, tp_i).
  const Topology topo = opt.topology();
  auto cache = std::make_shared<std::map<std::pair<int, int>, MemoryPlan>>();
  return [&job, topo, cache, world](int r) {
    const Coord c = topo.coord(r);
    auto [it, fresh] = cache->try_emplace({c.pp, c.tp});
    if (fresh) it->second = plan_memory_hybrid(job.model, job.optimizer, job.parallel, world, r);
    return it->second;
  };
}

// Who holds what, once the rank has set up (its buffers are what it keeps between steps).
void publish_layout(telemetry::TelemetrySink* sink, IShardedOptimizer& opt,
                    const MemoryPlan& plan) {
  if (!sink) return;
  telemetry::Event e;
  e.rank = opt.rank();
  e.time = telemetry::now_seconds();
  e.payload = layout_event(holdings_of(opt), tensor_extents(opt.full_layout()),
                           opt.options().sharding.strategy, plan);
  sink->publish(std::move(e));
}

// This rank's place among the ranks of its machine: its rank for threads; under mpi the launcher's
// local rank (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK, Slurm's SLURM_LOCALID), else its rank.
int local_rank(const Communicator& comm) {
  if (std::string(comm.backend()) != "mpi") return comm.rank();
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"})
    if (const char* v = std::getenv(name)) {
      char* end = nullptr;
      const long r = std::strtol(v, &end, 10);
      if (end != v && *end == '\0' && r >= 0) return static_cast<int>(r);
    }
  return comm.rank();
}

}  // namespace

ParallelRunResult run_rank(const JobSpec& job, Communicator& comm, const Datasets& data,
                           const RankRunOptions& options) {
  SL_ENFORCE(job.parallel.strategy != "none",
             "parallel.strategy: 'none' runs in one process; choose ddp, zero1, zero2 or fsdp");
  SL_ENFORCE(data.train != nullptr, "run_rank: no training data");
  // cpu, or a device of the rank's own (test, or cuda on GPU local rank mod the usable GPUs, so
  // ranks may share one): the strategies run on device memory, collectives staged through the
  // host.
  require_device(job.device);
  SL_ENFORCE(!options.callbacks.should_stop,
             "run_rank: callbacks.should_stop would run on rank 0 only; use RankRunOptions::stop");
  ParallelRunResult out;
  RankReport mine;
  std::function<MemoryPlan(int)> plan_of;
  telemetry::TelemetrySink* sink = options.telemetry ? options.telemetry(comm.rank()) : nullptr;
  std::optional<TeachingSink> teaching;
  if (sink && options.teaching) sink = &teaching.emplace(sink, options.teaching);
  publish_job_state(sink, comm.rank(), telemetry::JobState::starting);
  try {
    MemoryLedger ledger;
    LedgerScope bind(&ledger);
    // The rank's device, made on its thread (or process), before the model that lives on it.
    std::unique_ptr<Device> device;
    ShardedOptions sharded = sharded_options(job);
    if (job.device != "cpu") {
      DeviceOptions d;
      if (job.device == "cuda") d.index = gpu_for_local_rank(local_rank(comm));
      device = make_device(parse_device_kind(job.device), d);
      sharded.device = device.get();
    }
    std::unique_ptr<Communicator> device_comm;
    if (options.device_comm) {
      SL_ENFORCE_T(InternalError, device != nullptr,
                   "run_rank: a device communicator for a job on the host device");
      device_comm = options.device_comm(comm, *device);
      sharded.device_comm = device_comm.get();
    }
    std::unique_ptr<IShardedOptimizer> opt = make_sharded_optimizer(comm, sharded);
    // Declared after the optimizer, so destroyed before it: the device communicator settles what
    // it still has queued while the buffers it reads exist.
    struct SettleFirst {
      std::unique_ptr<Communicator>& c;
      ~SettleFirst() { c.reset(); }
    } settle_first{device_comm};
    start_rank(*opt, comm, job, options);
    plan_of = plan_of_ranks(job, *opt);
    publish_layout(sink, *opt, plan_of(comm.rank()));
    publish_job_state(sink, comm.rank(), telemetry::JobState::running);
    out.result = train_rank(*opt, comm, data, options, ledger, mine, sink);
  } catch (const std::exception& e) {
    if (options.teaching) options.teaching->close();  // the other ranks must not stay held
    publish_job_state(sink, comm.rank(), telemetry::JobState::failed, e.what());
    throw;
  }
  publish_job_state(sink, comm.rank(), telemetry::JobState::finished);
  if (options.comm_totals) {
    mine.comm_seconds = options.comm_totals->seconds(comm.rank());
    mine.comm_ops = options.comm_totals->ops(comm.rank());
  }
  out.ranks = gather_reports(comm, mine, plan_of);
  return out;
}

ParallelRunResult run_threads_job(const JobSpec& job, const Datasets& data,
                                  const RankRunOptions& options) {
  return run_threads_job(job, data, job_comm_options(job.parallel), options);
}

ParallelRunResult run_threads_job(const JobSpec& job, const Datasets& data,
                                  const CommOptions& comm_options, const RankRunOptions& options) {
  const int n = static_cast<int>(job.parallel.world_size);
  SL_ENFORCE(n >= 1 && n <= kMaxWorldSize, "parallel.world_size: must be in [1, {}], got {}",
             kMaxWorldSize, n);
  RankRunOptions opts = options;
  if (!opts.comm_topology) opts.comm_topology = comm_topology_of(job.parallel, n);
  if (!opts.comm_totals) opts.comm_totals = std::make_shared<CommTotalsSink>(n, opts.comm_topology);
  ParallelRunResult result;
  std::mutex mu;
  CommOptions copts = comm_options;
  copts.sink = with_comm_telemetry(opts.comm_totals, opts.telemetry, opts.comm_topology);
  run_threads(n, copts, [&](Communicator& comm) {
    ParallelRunResult r = run_rank(job, comm, data, opts);
    if (comm.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      result = std::move(r);
    }
  });
  return result;
}

}  // namespace shardlab
