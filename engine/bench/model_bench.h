// `shardlab bench model`: training throughput of the example jobs on each device. Runs
// resources/jobs/fashion_mlp.json (samples/s) and chars_gpt.json (tokens/s) in one process
// (parallel.strategy none, no evaluation) for warm-up steps and then timed steps, on the CPU
// (Trainer) and on GPU 0 (engine/device/device_training.h), and reports each rate and the
// GPU/CPU ratio. The rate of a run is the units (samples or target tokens) of its timed steps over
// their summed step times (StepInfo::step_seconds).
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
