// Running a job on its device: the entry the CLI (shardlab run, shardlab bench model) uses for
// "device": "cuda". Always built; without the CUDA kernels in this build every function says so
// instead of training.
#pragma once

#include <string>

#include "engine/comm/communicator.h"
#include "engine/job/build.h"
#include "engine/job/job_spec.h"
#include "engine/train/trainer.h"

namespace shardlab {

// True when this shardlab was built with the GPU training path (the CUDA kernels).
bool device_training_built();

// Why this job cannot train on its device in this version, or "" when it can ("cpu" always can).
// For "cuda": strategy none (one GPU) or ddp with the threads backend (one GPU per rank, NCCL);
// no checkpoints or resume yet. Says nothing about whether a GPU is present
// (engine/core/device.h does).
std::string device_job_problem(const JobSpec& job);

// Everything a job asks of this process's devices, checked before any data is read, in this order:
// device_job_problem (the same answer on every machine), require_device (a usable GPU 0 this
// build's kernels run on), and for cuda ddp: world_size usable GPUs, each able to run the kernels,
// and train.batch_size divisible by world_size x train.accumulation_steps. Throws InvalidArgument
// "device: ..." naming the problem and what to do.
void require_job_device(const JobSpec& job);

// Trains setup.job on GPU 0 (strategy none) or on world_size GPUs as threads (ddp): the model is
// built and initialised on the host exactly as build_training did (setup.model), copied to the
// device, and trained by GpuTrainer. result.params holds the final parameters. Checks
// require_job_device first (InvalidArgument); DeviceError / TimeoutError for a device failure.
// `comm`: the ranks' communication options for ddp, as the launch layer prepared them from the job
// (launch::PreparedJob::comm; unused by strategy none).
TrainResult run_device_training(TrainingSetup& setup, const TrainerCallbacks& callbacks = {},
                                const CommOptions& comm = {});

}  // namespace shardlab
