// NCCL on this node's GPUs: the checks of `shardlab doctor` group "nccl", and of the Qt suite
// tst_comm_nccl, which calls this function beside its conformance sweep.
//
// For world 1 (GPU 0) and, with two GPUs or more, one rank per GPU (ranks as threads bootstrapped
// by the threads backend, as `shardlab run` does): all_reduce (sum and max), reduce_scatter (sum),
// all_gather and broadcast of 1, 4099 and 2^20 + 3 floats on device buffers, against values
// computed on the host. The contributions are small integers, so every sum is exact in float32
// whatever order NCCL adds in: the bound is 0 elements differing.
#pragma once

#include "engine/doctor/check.h"

namespace shardlab::doctor {

// Without a usable GPU, or in a build without NCCL: one skipped check saying why. Never throws.
CheckList nccl_checks();

}  // namespace shardlab::doctor
