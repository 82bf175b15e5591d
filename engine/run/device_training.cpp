// Running a job on its device. Strategy none: GPU 0 on the calling thread. With ranks: threads
// running the engine's strategies (run_threads_job), over NCCL where each rank has a GPU of its
// own; callbacks on rank 0, the result from rank 0.
#include "engine/run/device_training.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "engine/core/device.h"
#include "engine/core/error.h"
#include "engine/core/memory.h"

#include "engine/run/rank_runner.h"
#if defined(SHARDLAB_HAVE_NCCL) && SHARDLAB_HAVE_NCCL
#include "engine/comm/nccl/world.h"
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

bool cuda_over_nccl(const JobSpec& job) {
#if defined(SHARDLAB_HAVE_NCCL) && SHARDLAB_HAVE_NCCL
  const ParallelConfig& p = job.parallel;
  if (job.device != "cuda" || p.strategy == "none" || p.backend != "threads" ||
      uses_model_parallelism(p))
    return false;
  std::string why;
  return p.world_size <= usable_gpus(&why);
#else
  (void)job;
  return false;
#endif
}

std::function<std::unique_ptr<Communicator>(Communicator&, Device&)> nccl_device_comm(
    const JobSpec& job, const CommOptions& comm) {
#if defined(SHARDLAB_HAVE_NCCL) && SHARDLAB_HAVE_NCCL
  if (!cuda_over_nccl(job)) return {};
  return [comm](Communicator& bootstrap, Device& device) {
    (void)device;  // rank r's device is GPU r (world_size <= the usable GPUs, threads)
    return make_nccl_world(bootstrap, bootstrap.rank(), comm);
  };
#else
  (void)job, (void)comm;
  return {};
#endif
}

void require_job_device(const JobSpec& job) {
  const std::string problem = device_job_problem(job);
  SL_ENFORCE(problem.empty(), "device: {}", problem);
  require_device(job.device);
  if (job.device != "cuda" || job.parallel.strategy == "none") return;
  const ParallelConfig& p = job.parallel;
  // The GPUs the ranks of this process use (threads: all of them; mpi: each worker its own).
  if (p.backend != "threads") return;
  std::string why;
  const int used = std::min<int>(static_cast<int>(p.world_size), usable_gpus(&why));
  for (int g = 1; g < used; ++g) {
    const std::string gpu = gpu_problem(g);
    SL_ENFORCE(gpu.empty(), "device: {}; run it with --set device=cpu", gpu);
  }
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
  // The ranks as threads, each the engine's strategy on its GPU: device memory over NCCL where
  // there is a GPU per rank, staged through the host otherwise; control values over the threads
  // world.
  SL_ENFORCE_T(InternalError, !callbacks.should_stop,
               "run_device_training: should_stop would run on rank 0 only");
  RankRunOptions ro;
  ro.callbacks = callbacks;
  ro.device_comm = nccl_device_comm(job, comm);
  return run_threads_job(job, setup.data, comm, ro).result;
}

#else

TrainResult run_device_training(TrainingSetup&, const TrainerCallbacks&, const CommOptions&) {
  SL_THROW(InvalidArgument,
           "device: this shardlab was built without the CUDA kernels (nvcc was not found when it "
           "was built), so it cannot train on a GPU; run it with --set device=cpu");
}

#endif

}  // namespace shardlab
