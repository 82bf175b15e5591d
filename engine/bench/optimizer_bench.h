// `shardlab bench optimizer`: how close each optimizer's step() gets to the machine's memory
// bandwidth. An optimizer step is a streaming, memory-bound loop, so the yardstick is a STREAM
// triad measured in the same run, on the same core, at the same size.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "engine/optim/optimizer_config.h"

namespace shardlab {

struct OptimizerBenchOptions {
  int64_t n = int64_t{16} << 20;  // parameters per optimizer (and elements per triad array)
  int warmup = 2;                 // untimed steps first (page faults, caches, clocks)
  int reps = 10;                  // timed steps; also the triad's repetitions
  // Which optimizers, in order; empty means all of optimizer_names().
  std::vector<std::string> optimizers;
};

struct OptimizerBenchRow {
  std::string optimizer;    // "sgd", "adam", ...
  std::string setting;      // the non-default hyper-parameters benchmarked, e.g. "momentum=0.9"
  int64_t n = 0;            // parameters
  int bytes_per_param = 0;  // (param r+w, grad r, each state array r+w) x 4 bytes
  double best_seconds = 0;
  double median_seconds = 0;
  double params_per_s = 0;    // n / best_seconds
  double gb_per_s = 0;        // bytes_per_param * n / best_seconds / 1e9
  double triad_gb_per_s = 0;  // the triad measured in this run
  double triad_ratio = 0;     // gb_per_s / triad_gb_per_s
};

// The configuration `name` is benchmarked in (CPU and CUDA alike), and in `setting` its
// non-default hyper-parameters ("momentum=0.9"; "defaults"). SGD uses momentum because that is
// how it is trained in practice (and plain SGD would be a 12-byte triad in disguise); AdamW gets a
// weight decay so its decoupled-decay multiply is exercised.
OptimizerConfig optimizer_bench_config(const std::string& name, std::string& setting);

// Measures the triad, then for each optimizer: attach to n parameters, `warmup` steps, then
// `reps` timed steps; rates use the best step. Bytes per parameter are counted from the
// optimizer's own state() arrays, so they always match what the kernel streams:
//   sgd (momentum 0.9):   p r+w, g r, momentum_buffer r+w      = 5 x 4 = 20 B
//   adam, adamw:          p r+w, g r, exp_avg r+w, exp_avg_sq r+w = 7 x 4 = 28 B
//   rmsprop (momentum 0): p r+w, g r, square_avg r+w           = 5 x 4 = 20 B
//   adagrad:              p r+w, g r, sum r+w                  = 5 x 4 = 20 B
// Prints an aligned table to `out` and returns its rows. Throws InvalidArgument for n < 1,
// reps < 1, warmup < 0 or an unknown optimizer name.
std::vector<OptimizerBenchRow> run_optimizer_bench(const OptimizerBenchOptions& options,
                                                   std::ostream& out);

}  // namespace shardlab
