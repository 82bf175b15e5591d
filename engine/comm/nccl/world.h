// Making the NCCL world: one GPU per rank, bootstrapped over another backend.
//
// NCCL needs every rank to hold the same ncclUniqueId before it can build a communicator. Rank 0
// makes the id and sends it over `bootstrap`, any host-memory Communicator: mpi across processes
// (one GPU each), threads for several GPUs in one process. So NCCL needs no launcher of its own.
// Buffers given to the communicator it returns are device pointers (see communicator.h).
#pragma once

#include <memory>
#include <string>

#include "engine/comm/communicator.h"

namespace shardlab {

// Creates this rank's NCCL communicator for `device`, named "world", with bootstrap's rank and
// size. Collective over `bootstrap`: every rank calls it. Ranks first agree over `bootstrap` that
// each has its GPU, so a rank without one makes all of them throw CommError at once (its own
// naming the reason) rather than leaving the others waiting. Initialisation is bounded by
// options.timeout (TimeoutError). The calling thread's current CUDA device is left unchanged.
std::unique_ptr<Communicator> make_nccl_world(Communicator& bootstrap, int device,
                                              const CommOptions& options);

// Number of usable CUDA devices, or 0 with `why` (may be null) set to the reason, e.g. "CUDA driver
// version is insufficient for CUDA runtime version (cudaErrorInsufficientDriver)". Never throws.
// (engine/core/device.h usable_gpus, which the job's device check uses too.)
int usable_cuda_devices(std::string* why);

}  // namespace shardlab
