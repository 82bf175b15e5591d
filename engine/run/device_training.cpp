// Running a job on its device. Strategy none: GPU 0 on the calling thread. ddp over NCCL (threads
// backend, one GPU per rank): world_size threads, rank r on GPU r, each the engine's ddp rank
// (run_rank) whose gradient buckets NCCL all-reduces from device memory, bootstrapped by the
// threads world; callbacks on rank 0, the result from rank 0. Every other cuda job with ranks runs
// through run_rank with its collectives staged through the host (engine/run/rank_runner.h).
#include "engine/run/device_training.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "engine/core/device.h"
#include "engine/core/error.h"
#include "engine/core/memory.h"

#if SHARDLAB_HAVE_DEVICE_TRAINING
#include "engine/comm/threads/world.h"
#include "engine/run/rank_runner.h"
#if defined(SHARDLAB_HAVE_NCCL) && SHARDLAB_HAVE_NCCL
#include "engine/comm/nccl/world.h"
#endif
#endif

namespace shardlab {

bool device_training_built() {
  return SHARDLAB_HAVE_DEVICE_TRAINING != 0;
}

std::string device_job_problem(const JobSpec& job) {
  // Every job that passes validation runs on every device in this version (strategy none's lack
  // of checkpoints is validation's rule on every device). Device-specific limits go here.
  (void)job;
  return {};
}

bool cuda_ddp_over_nccl(const JobSpec& job) {
#if defined(SHARDLAB_HAVE_NCCL) && SHARDLAB_HAVE_NCCL
  const ParallelConfig& p = job.parallel;
  if (job.device != "cuda" || p.strategy != "ddp" || p.backend != "threads" ||
      uses_model_parallelism(p) || !job.train.checkpoint_dir.empty())
    return false;
  std::string why;
  return p.world_size <= usable_gpus(&why);
#else
  (void)job;
  return false;
#endif
}

void require_job_device(const JobSpec& job) {
  const std::string problem = device_job_problem(job);
  SL_ENFORCE(problem.empty(), "device: {}", problem);
  require_device(job.device);
  if (job.device != "cuda" || job.parallel.strategy == "none") return;
  const ParallelConfig& p = job.parallel;
  // The GPUs the ranks of this process use (threads: all of them; mpi: checked by each worker
  // for its own).
  if (p.backend == "threads") {
    std::string why;
    const int used = std::min<int>(static_cast<int>(p.world_size), usable_gpus(&why));
    for (int g = 1; g < used; ++g) {
      const std::string gpu = gpu_problem(g);
      SL_ENFORCE(gpu.empty(), "device: {}; run it with --set device=cpu", gpu);
    }
  }
  if (!cuda_ddp_over_nccl(job)) return;
  const int64_t split = p.world_size * job.train.accumulation_steps;
  SL_ENFORCE(job.train.batch_size % split == 0,
             "train.batch_size: must be divisible by parallel.world_size x "
             "train.accumulation_steps = {} on cuda ddp, got {}",
             split, job.train.batch_size);
}

#if SHARDLAB_HAVE_DEVICE_TRAINING

TrainResult run_device_training(TrainingSetup& setup, const TrainerCallbacks& callbacks,
                                const CommOptions& comm) {
  const JobSpec& job = setup.job;
  SL_ENFORCE(job.device == "cuda", "run_device_training: the job's device is {}, not cuda",
             job.device);
  require_job_device(job);
  SL_ENFORCE(setup.model && setup.data.train, "run_device_training: the setup is not built");

  if (job.parallel.strategy == "none") {
    // The one engine on GPU 0: build_training made the device and built the model on it.
    SL_ENFORCE_T(InternalError, setup.device && setup.device->kind() == DeviceKind::cuda,
                 "run_device_training: the setup's model is not on a GPU");
    return run_training(setup, callbacks);
  }
  SL_ENFORCE(cuda_ddp_over_nccl(job),
             "run_device_training: a {} job on {} ranks (backend {}) runs its ranks through the "
             "engine (run_rank), not here",
             job.parallel.strategy, job.parallel.world_size, job.parallel.backend);

#if defined(SHARDLAB_HAVE_NCCL) && SHARDLAB_HAVE_NCCL
  // The engine's ddp on each rank's GPU (run_rank: the model built on its device), its gradient
  // buckets all-reduced by NCCL straight from device memory; the small control values over the
  // threads world that bootstrapped NCCL.
  SL_ENFORCE_T(InternalError, !callbacks.should_stop,
               "run_device_training: should_stop would run on rank 0 only");
  const auto world = static_cast<int>(job.parallel.world_size);
  RankRunOptions ro;
  ro.callbacks = callbacks;
  ro.device_comm = [&comm](Communicator& bootstrap, Device& device) {
    (void)device;  // rank r's device is GPU r (world_size <= the usable GPUs)
    return make_nccl_world(bootstrap, bootstrap.rank(), comm);
  };
  std::optional<TrainResult> result;
  run_threads(world, comm, [&](Communicator& bootstrap) {
    ParallelRunResult r = run_rank(job, bootstrap, setup.data, ro);
    if (bootstrap.rank() == 0) result = std::move(r.result);
  });
  SL_ENFORCE_T(InternalError, result.has_value(), "run_device_training: rank 0 gave no result");
  return std::move(*result);
#else
  (void)comm;
  SL_THROW(InvalidArgument,
           "device: cuda runs ddp over NCCL, and this shardlab was built without NCCL; use "
           "--set parallel.strategy=none for one GPU or --set device=cpu");
#endif
}

#else

TrainResult run_device_training(TrainingSetup&, const TrainerCallbacks&, const CommOptions&) {
  SL_THROW(InvalidArgument,
           "device: this shardlab was built without the CUDA kernels (nvcc was not found when it "
           "was built), so it cannot train on a GPU; run it with --set device=cpu");
}

#endif

}  // namespace shardlab
