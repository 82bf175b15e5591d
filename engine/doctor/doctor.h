// `shardlab doctor`: checks this node before a job runs on it, and says in words what is wrong.
// Today its checks are this node's GPUs (the groups below); every check is one CheckResult with
// its figure and bound (check.h), so the CLI prints one table and --json one document, and the Qt
// suites assert the same results.
//
//   kernels   every CUDA kernel against its CPU reference (kernel_checks.h)
//   model     the GPU model's loss and every gradient against the CPU model (model_checks.h)
//   training  GPU training against CPU training under the --verify rule, every optimizer,
//             accumulation and clipping, ddp over NCCL (training_checks.h)
//   memory    the device-memory ledger against the planner (training_checks.h)
//   nccl      NCCL collectives on the local GPUs (nccl_checks.h)
//
// On a node without a usable GPU (or a build without the CUDA kernels) each group is one skipped
// check whose detail says why. No dataset file is needed: the MLP trains on a synthetic set
// written in Fashion-MNIST's format, the GPT on the built-in corpus (gpu_fixtures.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/doctor/check.h"

namespace shardlab::doctor {

// The groups, in the order they run.
const std::vector<std::string>& group_names();

struct DoctorOptions {
  // The groups to run (names from group_names()); empty: all of them.
  std::vector<std::string> groups;
};

struct DoctorReport {
  std::string host;
  std::vector<std::string> gpus;  // describe_gpu() of each usable GPU (empty: none)
  std::string no_gpu_reason;      // why there is none ("" when there is one)
  CheckList checks;
  double seconds = 0;
};

// Runs the groups; `on_group` (optional) is called with each group's results as it finishes, so
// a caller can print as it goes. InvalidArgument for an unknown group name (before anything
// runs). Never throws for a failing check.
DoctorReport run_doctor(
    const DoctorOptions& options,
    const std::function<void(const std::string& group, const CheckList& results)>& on_group = {});

}  // namespace shardlab::doctor
