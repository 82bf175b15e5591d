// Where a job's tensors live: the job's "device" ("cpu", the default, or "cuda") and whether this
// process can honour it. Checked before any rank starts, so a job that cannot run on its device
// stops with one line instead of failing half-way.
#pragma once

#include <string>

namespace shardlab {

// The number of CUDA devices this process can use; 0 with `why` set ("built without CUDA", the
// CUDA runtime's error, "no CUDA device is visible") when there is none.
int usable_gpus(std::string* why);

// Why a job with `device` cannot run in this process, or "" when it can: "cpu" always can;
// "cuda" needs a CUDA build, a usable GPU and the CUDA kernels (built when nvcc was found), which
// the GPU training path (engine/device/device_training.h) runs on. Whether the job itself can run
// on cuda (its strategy, checkpoints) is device_job_problem()'s question.
std::string device_problem(const std::string& device);

// "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)" for CUDA device `index`, or why it cannot be named
// ("no such device: ...", "built without a CUDA toolkit"). Never throws.
std::string describe_gpu(int index);

// Throws InvalidArgument "device: <problem>" when device_problem() is not empty.
void require_device(const std::string& device);

}  // namespace shardlab
