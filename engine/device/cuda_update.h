// One optimizer update on the GPU: the kernels/cuda launcher for whichever kernel an UpdateArgs
// (engine/optim/update_args.h, built from the optimizer's registry entry) is for. Shared by
// `bench optimizer --device cuda`, so it does not name the optimizers (the engine's optimizers on
// the cuda device go through CudaDevice's kernel table instead).
#pragma once

#include <cuda_runtime_api.h>

#include <variant>

#include "engine/device/cuda_context.h"
#include "engine/optim/update_args.h"
#include "kernels/cuda/adagrad_update.h"
#include "kernels/cuda/adam_update.h"
#include "kernels/cuda/rmsprop_update.h"
#include "kernels/cuda/sgd_update.h"

namespace shardlab {

// Enqueues the update on `stream`; a failed launch throws DeviceError naming the kernel
// ("adam_update: ...").
inline void run_cuda_update(const UpdateArgs& args, cudaStream_t stream) {
  std::visit(
      Overloaded{[&](const kernels::SgdArgs& a) {
                   device_call("sgd_update", [&] { kernels::sgd_update_cuda(a, stream); });
                 },
                 [&](const kernels::AdamArgs& a) {
                   device_call("adam_update", [&] { kernels::adam_update_cuda(a, stream); });
                 },
                 [&](const kernels::RmspropArgs& a) {
                   device_call("rmsprop_update", [&] { kernels::rmsprop_update_cuda(a, stream); });
                 },
                 [&](const kernels::AdagradArgs& a) {
                   device_call("adagrad_update", [&] { kernels::adagrad_update_cuda(a, stream); });
                 }},
      args);
}

}  // namespace shardlab
