// The engine's model on a device against the same model on the cpu: the checks of `shardlab
// doctor` group "model" (on a GPU), of the Qt suite tst_gpu_model (the same, on a GPU) and of
// tst_device_engine (on the test device, where every figure is 0).
//
// For the MLP (ReLU and GELU) and a small GPT (a full and a shorter sequence), from the CPU
// model's own initial parameters and one random batch:
//   loss            |device - cpu| / |cpu| <= 1e-5: the same layers in the same order, so only a
//                   GPU's expf/logf/tanhf (a few ulp) and cuBLAS's summation order differ
//   correct         |device - cpu| <= 0 (the argmax count)
//   gradients       max |device - cpu| / max |cpu| over all gradients <= 1e-4: GEMM summation
//                   order over a few hundred terms, amplified through the layers (the CPU BLAS
//                   itself moves them by ~1e-6 between kernels)
//   per parameter   the same, per parameter tensor, <= 1e-2: loose, but a wrongly bound parameter
//                   (an O(1) error) shows here even where the global maximum hides it
//   qkv key bias    elements of the key part of each fused qkv bias gradient that are not zero
//                   (the key bias cannot change the softmax): 0
//   accumulate      two steps' gradients added (no zeroing between) against twice one, <= 1e-4
//                   relative (one addition's rounding per element, checked loosely)
//   scale           dlogits halved on the device against half of one step's gradients, <= 1e-6
//                   (halving is exact; the rest is the same computation)
//   round trip      parameters read back after construction and after a copy from the host,
//                   elements differing: 0
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/data/batch.h"
#include "engine/device/device.h"
#include "engine/doctor/check.h"
#include "engine/model/model.h"
#include "engine/model/model_config.h"

namespace shardlab::doctor {

// The cases' models and data, for suites that test more of the models on the same ones: an MLP
// 12-16-8-5 (seed 7) with `activation`, a GPT (vocabulary 20, context 16, width 32, 2 layers, 4
// heads, seed 11), and a random batch (MLP: 6 rows of normal features; GPT: 3 rows of `steps`
// ids) from `seed`.
ModelConfig check_mlp_config(const std::string& activation);
ModelConfig check_gpt_config();
Batch check_batch(const ModelConfig& config, uint32_t seed, int64_t steps = 16);

// One step from zeroed gradients on the model's device, its gradients read back: on the cpu, the
// reference the device's model is held to.
struct CpuStep {
  float loss = 0;
  int64_t correct = 0;
  std::vector<float> grads;
};
CpuStep cpu_step(Model& model, const Batch& batch);

// The checks above for the models on `device` (any kind). Never throws.
CheckList device_model_checks(Device& device);
// On CUDA device `device`. Without a usable GPU: one skipped check ("no usable GPU: ..."); in a
// build without the CUDA kernels: one skipped check saying so. Never throws.
CheckList gpu_model_checks(int device = 0);

}  // namespace shardlab::doctor
