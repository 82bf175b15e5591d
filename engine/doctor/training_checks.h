// GPU training against CPU training, and the device-memory ledger against the planner: the checks
// of `shardlab doctor` groups "training" and "memory", and of the Qt suite tst_device_training,
// which calls these functions.
//
// training: each case trains the same job (gpu_fixtures.h: the MLP on the synthetic set, the GPT
// on the built-in corpus, 10 steps) on the CPU and on the GPU from the same initial parameters,
// and judges the GPU run by the rule of `shardlab run --verify` (engine/job/equivalence.h): the
// CPU's own noise floor (the job again with its batch cut into micro-batches and reversed) gives
// the tolerances for the final parameters, every step's loss and the final evaluation loss. Cases:
// the MLP with Adam, SGD (momentum, Nesterov, weight decay), AdamW, RMSprop (momentum), Adagrad
// (initial accumulator), Adam with accumulation 2 and clipping at 1.0, and the GPT with AdamW;
// ddp over NCCL on one GPU against the single-GPU run (bit for bit: an all-reduce of one rank and
// a scale by 1/1 change nothing); ddp on every GPU of the node against the CPU where there are two
// or more; and the sharded jobs with ranks sharing the GPU (sharing_checks.h).
//
// memory: a GPU run of the MLP job with a ledger bound: the device bytes it charges under params,
// grads and optimizer_state during training equal the planner's figures for the job (plan_memory,
// engine/plan/memory/planner.h) exactly, activations are charged, and all of it is released at the
// end.
#pragma once

#include <functional>
#include <string>

#include "engine/doctor/check.h"
#include "engine/job/build.h"
#include "engine/job/job_spec.h"

namespace shardlab::doctor {

// Judges `run()` (a run of `job` on its device, with ranks or not) against the same job in one
// process on the CPU under the --verify rule: the CPU's noise floor for the job's layout gives the
// tolerances for the final parameters, every step's loss and the evaluation losses (three checks
// "<name>: ..." of group "training"; one failed check when the floor is inconsistent or training
// moved too little to judge). `run` is called after the CPU runs.
void judge_against_cpu(CheckList& out, const std::string& name, const JobSpec& job,
                       const std::function<TrainResult()>& run);

// On CUDA device `device` (ddp: devices 0..n-1). Without a usable GPU: one skipped check ("no
// usable GPU: ..."); in a build without the CUDA kernels: one skipped check saying so. Never
// throws.
CheckList training_checks(int device = 0);
CheckList memory_checks(int device = 0);

}  // namespace shardlab::doctor
