// Where a job's tensors live: the job's "device" ("cpu", the default, or "cuda") and whether this
// process can honour it. Checked before any rank starts, so a job that cannot run on its device
// stops with one line instead of failing half-way.
#pragma once

#include <string>

namespace shardlab {

// The number of CUDA devices this process can use; 0 with `why` set ("built without CUDA", the
// CUDA runtime's error, "no CUDA device is visible") when there is none.
int usable_gpus(std::string* why);

// The GPU a rank of a cuda job uses: its rank among the ranks of its machine (`local_rank`)
// modulo the usable GPUs, so ranks beyond the GPUs share them; 0 when there is none.
int gpu_for_local_rank(int local_rank);

// Why a job with `device` cannot run in this process, or "" when it can: "cpu" always can;
// "cuda" needs a CUDA build, the CUDA kernels (built when nvcc was found), which the GPU training
// path (engine/run/device_training.h) runs on, and a usable GPU 0 they can run on
// (gpu_problem(0)). The reason only, e.g. "cuda needs a usable GPU, but no CUDA device is visible
// to this process"; callers add what to do. Whether the job itself can run on cuda (its strategy,
// checkpoints) is device_job_problem()'s question.
std::string device_problem(const std::string& device);

// Why CUDA device `index` cannot run this build's kernels, or "": it must exist, and its compute
// capability must be at least the lowest architecture the kernels were built for (sm_90 SASS +
// compute_90 PTX by default: Hopper and newer), e.g. "GPU 0 (NVIDIA A100-SXM4-80GB) is sm_80, and
// this build's CUDA kernels need sm_90 or newer (rebuild with CMAKE_CUDA_ARCHITECTURES=80)".
std::string gpu_problem(int index);

// "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)" for CUDA device `index`, or why it cannot be named
// ("no such device: ...", "built without a CUDA toolkit"). Never throws.
std::string describe_gpu(int index);

// Throws InvalidArgument "device: <problem>; run it with --set device=cpu" when device_problem() is
// not empty.
void require_device(const std::string& device);

}  // namespace shardlab
