// `shardlab bench optimizer --device cuda`: how close each fused optimizer update kernel
// (kernels/cuda) gets to the GPU's memory bandwidth. The yardstick is a device-to-device copy
// (cudaMemcpyAsync) of a large buffer, measured in the same run on the same GPU; both are timed
// with cudaEvents. Built only with the CUDA kernels (SHARDLAB_HAVE_CUDA_KERNELS).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace shardlab {

struct OptimizerBenchCudaOptions {
  int64_t n = int64_t{64} << 20;  // parameters per update (and floats in the copy yardstick)
  int warmup = 3;                 // untimed updates first (clocks, first-launch costs)
  int reps = 20;                  // timed updates; also the copy's repetitions
  // Which optimizers, in order; empty means all of optimizer_names(). "adam" also gets a second
  // row for its bf16-master variant (AdamArgs::param_bf16).
  std::vector<std::string> optimizers;
};

struct OptimizerBenchCudaRow {
  std::string optimizer;    // "sgd", "adam", ...
  std::string setting;      // the benchmarked configuration, e.g. "momentum=0.9", "bf16 master"
  int64_t n = 0;            // parameters
  int bytes_per_param = 0;  // see run_optimizer_bench_cuda()
  double best_seconds = 0;
  double median_seconds = 0;
  double params_per_s = 0;   // n / best_seconds
  double gb_per_s = 0;       // bytes_per_param * n / best_seconds / 1e9
  double copy_gb_per_s = 0;  // the device copy measured in this run
  double copy_ratio = 0;     // gb_per_s / copy_gb_per_s
};

// On CUDA device 0: allocates params, grads and state arrays of n floats, measures the copy
// bandwidth (a D2D cudaMemcpyAsync of n floats; 2 x 4 x n bytes: the read and the write), then for
// each optimizer: `warmup` updates, then `reps` timed updates (cudaEvent pairs around each one);
// rates use the best update. Bytes per update = bytes_per_param x n, counting every array the
// kernel reads and every array it writes, each once:
//   sgd (momentum 0.9):   p r+w, g r, momentum_buf r+w               = 5 x 4     = 20 B
//   adam, adamw:          p r+w, g r, exp_avg r+w, exp_avg_sq r+w    = 7 x 4     = 28 B
//   adam, bf16 master:    the above + param_bf16 w (2 B)             = 7 x 4 + 2 = 30 B
//   rmsprop (momentum 0): p r+w, g r, square_avg r+w                 = 5 x 4     = 20 B
//   adagrad:              p r+w, g r, sum r+w                        = 5 x 4     = 20 B
// Prints an aligned table to `out` (the layout of run_optimizer_bench's, with the copy in place of
// the triad) and returns its rows. Throws InvalidArgument for n < 1, reps < 1, warmup < 0 or an
// unknown optimizer name, and Error naming the CUDA call for a CUDA failure (no device, out of
// device memory, a failed launch).
std::vector<OptimizerBenchCudaRow> run_optimizer_bench_cuda(
    const OptimizerBenchCudaOptions& options, std::ostream& out);

}  // namespace shardlab
