// Running a job on its device: the entry the CLI (shardlab run, shardlab bench model) uses for
// "device": "cuda". Always built; without the CUDA kernels in this build every function says so
// instead of training.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "engine/comm/communicator.h"
#include "engine/device/device.h"
#include "engine/job/build.h"
#include "engine/job/job_spec.h"
#include "engine/train/trainer.h"

namespace shardlab {

// True when this shardlab was built with the GPU training path (the CUDA kernels).
bool device_training_built();

// Why this job cannot train on its device in this version, or "" when it can: the same answer on
// every machine. In this version every job that passes validation runs on "cpu", "test" and
// "cuda" (every strategy, layout pp x tp x dp and backend, with checkpoints that resume on any
// device), so it is always "". Says nothing about whether a GPU is present (engine/core/device.h
// does).
std::string device_job_problem(const JobSpec& job);

// Everything a job asks of this process's devices, checked before any data is read, in this order:
// device_job_problem (the same answer on every machine), require_device (a usable GPU 0 this
// build's kernels run on), and for a cuda job's threads ranks: each GPU they use able to run the
// kernels. Throws InvalidArgument "device: ..." naming the problem and what to do.
void require_job_device(const JobSpec& job);

// Whether a cuda job's ranks move device memory over NCCL in this version: a 1-D strategy (ddp,
// zero1, zero2, fsdp) on the threads backend with a GPU per rank (world_size <= the usable GPUs)
// in a build with NCCL. Otherwise the ranks run the same strategies with their collectives
// staged through the host (DeviceCollectives), rank r (its local rank under mpi) on GPU r mod the
// usable GPUs, so several ranks may share one GPU.
bool cuda_over_nccl(const JobSpec& job);

// What makes a rank's device communicator (RankRunOptions::device_comm) for a job where
// cuda_over_nccl holds: rank r's NCCL world on GPU r, bootstrapped over the rank's threads world,
// with `comm`'s options. Empty where it does not hold.
std::function<std::unique_ptr<Communicator>(Communicator&, Device&)> nccl_device_comm(
    const JobSpec& job, const CommOptions& comm);

// Trains setup.job on GPU 0 (strategy none, the engine's Trainer on the cuda device) or, for a job
// with ranks, runs its ranks as threads (run_threads_job, with nccl_device_comm where
// cuda_over_nccl holds) and returns rank 0's result. result.params holds the final parameters.
// Checks require_job_device first (InvalidArgument); DeviceError / TimeoutError for a device
// failure. `comm`: the ranks' communication options, as the launch layer prepared them from the
// job (launch::PreparedJob::comm; unused by strategy none).
TrainResult run_device_training(TrainingSetup& setup, const TrainerCallbacks& callbacks = {},
                                const CommOptions& comm = {});

}  // namespace shardlab
