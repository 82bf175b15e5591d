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

// Why this job cannot train on its device in this version, or "" when it can: the same answer on
// every machine. In this version every job that passes validation runs on "cpu", "test" and
// "cuda" (every strategy, layout pp x tp x dp and backend, with checkpoints that resume on any
// device), so it is always "". Says nothing about whether a GPU is present (engine/core/device.h
// does).
std::string device_job_problem(const JobSpec& job);

// Everything a job asks of this process's devices, checked before any data is read, in this order:
// device_job_problem (the same answer on every machine), require_device (a usable GPU 0 this
// build's kernels run on), and for a job on NCCL (cuda_ddp_over_nccl): each rank's GPU able to run
// the kernels and train.batch_size divisible by world_size x train.accumulation_steps. Throws
// InvalidArgument "device: ..." naming the problem and what to do.
void require_job_device(const JobSpec& job);

// How a cuda job with ranks runs in this version. True: ddp with the threads backend on one GPU per
// rank (world_size <= the usable GPUs, NCCL built), without checkpoints: run_device_training's
// NCCL path. False: the
// ranks run the engine's strategies (run_rank) each on a device of its own, rank r (its local rank
// under mpi) on GPU r mod the usable GPUs, so several ranks may share one GPU, their collectives
// staged through the host (DeviceCollectives).
bool cuda_ddp_over_nccl(const JobSpec& job);

// Trains setup.job on GPU 0 (strategy none, the engine's Trainer on the cuda device) or, when
// cuda_ddp_over_nccl(job), on world_size GPUs as threads over NCCL (the GPU trainer of old, until
// ddp over NCCL runs on the engine). result.params holds the final parameters. Checks
// require_job_device first (InvalidArgument); DeviceError / TimeoutError for a device failure.
// `comm`: the ranks' communication options for ddp, as the launch layer prepared them from the job
// (launch::PreparedJob::comm; unused by strategy none).
TrainResult run_device_training(TrainingSetup& setup, const TrainerCallbacks& callbacks = {},
                                const CommOptions& comm = {});

}  // namespace shardlab
