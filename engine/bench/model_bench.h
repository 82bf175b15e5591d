// `shardlab bench model`: training throughput of the example jobs on each device. Runs
// resources/jobs/fashion_mlp.json (samples/s) and chars_gpt.json (tokens/s) in one process
// (parallel.strategy none, no evaluation) for warm-up steps and then timed steps, on the CPU
// (Trainer) and on GPU 0 (engine/run/device_training.h), and reports each rate and the
// GPU/CPU ratio. The rate of a run is the units (samples or target tokens) of its timed steps over
// their summed step times (StepInfo::step_seconds).
//
// With gpu_shapes, both jobs take shapes sized for a GPU (see ModelBenchOptions).
//
// With pytorch_shapes, the jobs take the shapes of the single-process PyTorch 1.13 comparison,
// tests/bench/pytorch_shapes.py (one process, one BLAS thread, the same OpenBLAS): fashion_mlp as
// an MLP 784-512-256-10 with Adam at batch 256, chars_gpt at context 64, width 64, 2 layers, 4
// heads, batch 32 (AdamW), and the BLAS library, its kernels and its thread count are printed
// first.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace shardlab {

struct ModelBenchOptions {
  std::string device = "both";  // "cpu" | "cuda" | "both"
  int64_t steps = 20;           // timed steps per job and device
  int64_t warmup = 2;           // untimed steps first (allocation, caches, cuBLAS handles)
  // Folder holding fashion_mlp.json and chars_gpt.json; "" : resource_dir() + "/jobs".
  std::string jobs_dir;
  // The shapes of tests/bench/pytorch_shapes.py instead of the job files' own (see above).
  bool pytorch_shapes = false;
  // GPU-sized shapes (the PyTorch comparison on the same GPU, tests/bench/pytorch_gpu.py):
  // MLP 784-2048-2048-10 (ReLU, Adam) at batch 2048; GPT context 256, width 512, 8 layers, 8 heads
  // (AdamW) at batch 32. Not with pytorch_shapes.
  bool gpu_shapes = false;
  // The Fashion-MNIST folder for fashion_mlp (data.path); "": the job file's.
  std::string data_dir;
};

struct ModelBenchRow {
  std::string job;     // "fashion_mlp", "chars_gpt"
  std::string device;  // "cpu", "cuda"
  std::string unit;    // "samples", "tokens"
  int64_t steps = 0;   // timed steps
  double seconds = 0;  // their summed step time
  double per_second = 0;
};

struct ModelBenchResult {
  std::vector<ModelBenchRow> rows;  // job by job, cpu before cuda
  // Why cuda was not measured with device "both" (device_problem("cuda")); "" when it was or
  // was not asked for.
  std::string cuda_not_measured;
};

// Runs the bench and prints a line per job (and "cuda: not measured: <why>" when device is both
// and this process cannot use a GPU). Throws InvalidArgument for a bad option, and "device: ..."
// (InvalidArgument) for device cuda when this process cannot train on a GPU; IoError when a job
// file or its data is missing.
ModelBenchResult run_model_bench(const ModelBenchOptions& options, std::ostream& out);

}  // namespace shardlab
