// Sharded jobs whose ranks share one device, against the CPU: the part of `shardlab doctor`'s
// "training" group that runs the engine's strategies on a GPU (training_checks appends them for
// "cuda"), and of tst_device_doctor, which runs the same checks on the test device in CI.
//
// Each case runs its ranks as threads of this process, each on a device of `device`'s kind (cuda:
// GPU local rank mod the usable GPUs, so on a one-GPU node all four share GPU 0; their
// collectives are staged through the host), and is judged against the same job in one process on
// the CPU under the --verify rule (judge_against_cpu, training_checks.h):
//   ddp, zero1, zero2, fsdp       the MLP job of gpu_fixtures.h with 4 ranks
//   gpt tp 2 x dp 2, pp 2 x dp 2  the GPT job of gpu_fixtures.h, ZeRO-1 over dp, 2 micro-batches
//   checkpoint to cpu             ZeRO-2 on 2 ranks on the device, checkpointed at step 5 of 10;
//                                 the job resumed from it on the CPU, its final parameters, last
//                                 5 losses and evaluation judged against the CPU run
#pragma once

#include <string>

#include "engine/doctor/check.h"

namespace shardlab::doctor {

// `device`: "cuda" (without a usable GPU: one skipped check saying why) or "test". Never throws.
CheckList shared_device_checks(const std::string& device);

}  // namespace shardlab::doctor
