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
// "cuda" needs a CUDA build, a usable GPU and the device execution path (which this version
// does not have yet: the CUDA kernels are built, training on device buffers comes next).
std::string device_problem(const std::string& device);

// Throws InvalidArgument "device: <problem>" when device_problem() is not empty.
void require_device(const std::string& device);

}  // namespace shardlab
