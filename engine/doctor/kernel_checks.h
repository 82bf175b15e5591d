// The CUDA kernels of kernels/cuda against their CPU references of kernels/cpu, on random data of
// several sizes and shapes (odd ones included): the checks of `shardlab doctor` group "kernels",
// and of the Qt suite tst_kernels_cuda, which calls this same function.
//
// Check names are "<op> <case>": <op> is one word (the kernel, or the optimizer variant for the
// updates, e.g. "adamw_update"), optionally followed by the output compared ("layer_norm_forward
// y 7x33"), then the case's sizes. The tolerances and where they come from are in
// kernel_checks.cpp and in each check's detail.
#pragma once

#include "engine/doctor/check.h"

namespace shardlab::doctor {

// Every CUDA kernel against its CPU reference on CUDA device `device`: one CheckResult per (op,
// case) with group "kernels", e.g. "adam_update fp32 n=1000 steps=3" with metric "max rel err",
// figure the largest error and bound the tolerance. Without a usable GPU (none visible, `device`
// missing, or one this build's kernels cannot run on): a single skipped check whose detail starts
// with "no usable GPU: ". In a build without the CUDA kernels: a single skipped check saying so.
// Never throws: a CUDA failure fails the case it happened in; a wait that times out (60 s) fails
// its case and the remaining cases are not run (one failed check says so).
CheckList kernel_checks(int device = 0);

}  // namespace shardlab::doctor
