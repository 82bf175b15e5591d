#include "engine/bench/optimizer_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <ostream>

#include "engine/bench/harness.h"
#include "engine/bench/triad.h"
#include "engine/core/error.h"
#include "engine/optim/optimizer.h"

namespace shardlab {

OptimizerConfig optimizer_bench_config(const std::string& name, std::string& setting) {
  OptimizerConfig c;
  c.name = name;
  c.lr = 1e-3;
  if (name == "sgd") {
    c.momentum = 0.9;
    setting = "momentum=0.9";
  } else if (name == "adamw") {
    c.weight_decay = 0.01;
    setting = "weight_decay=0.01";
  } else {
    setting = "defaults";
  }
  return c;
}

std::vector<OptimizerBenchRow> run_optimizer_bench(const OptimizerBenchOptions& options,
                                                   std::ostream& out) {
  SL_ENFORCE(options.n >= 1, "bench.n: must be >= 1, got {}", options.n);
  SL_ENFORCE(options.reps >= 1, "bench.reps: must be >= 1, got {}", options.reps);
  SL_ENFORCE(options.warmup >= 0, "bench.warmup: must be >= 0, got {}", options.warmup);
  const std::vector<std::string> names =
      options.optimizers.empty() ? optimizer_names() : options.optimizers;
  // Build every optimizer before timing anything, so a bad name fails fast.
  std::vector<std::string> settings(names.size());
  for (size_t i = 0; i < names.size(); ++i)
    make_optimizer(optimizer_bench_config(names[i], settings[i]));

  const int64_t n = options.n;
  const TriadResult triad = measure_triad(n, options.reps);

  // Parameters and gradients are shared by all rows and refilled for each, so every optimizer
  // starts from the same values. Gradients are small and varied, never zero, so no kernel sees
  // denormals or a degenerate input.
  std::vector<float> params(static_cast<size_t>(n)), grads(static_cast<size_t>(n));
  std::vector<OptimizerBenchRow> rows;
  for (size_t i = 0; i < names.size(); ++i) {
    for (int64_t j = 0; j < n; ++j) {
      params[static_cast<size_t>(j)] = 0.5f + 1e-3f * static_cast<float>(j % 1000);
      grads[static_cast<size_t>(j)] = 1e-2f * static_cast<float>(j % 97 + 1) - 0.49f;
    }
    auto opt = make_optimizer(optimizer_bench_config(names[i], settings[i]));
    opt->attach({0, n});
    const int64_t state_arrays = static_cast<int64_t>(opt->state().size());
    const std::vector<double> times =
        bench::time_each(options.warmup, options.reps, [&] { opt->step(params, grads, 1e-3); });

    OptimizerBenchRow row;
    row.optimizer = names[i];
    row.setting = settings[i];
    row.n = n;
    row.bytes_per_param = static_cast<int>((2 + 1 + 2 * state_arrays) * sizeof(float));
    row.best_seconds = bench::best(times);
    row.median_seconds = bench::median(times);
    row.params_per_s = static_cast<double>(n) / row.best_seconds;
    row.gb_per_s = row.bytes_per_param * static_cast<double>(n) / row.best_seconds / 1e9;
    row.triad_gb_per_s = triad.gb_per_s;
    row.triad_ratio = row.gb_per_s / triad.gb_per_s;
    rows.push_back(row);
  }

  out << fmt::format("optimizer step, n = {} parameters, {} warm-up + {} timed steps (best)\n", n,
                     options.warmup, options.reps);
  out << fmt::format("{:<9} {:<18} {:>7} {:>9} {:>9} {:>10} {:>7} {:>7}\n", "optimizer", "setting",
                     "B/param", "best ms", "median ms", "Mparams/s", "GB/s", "triad");
  out << fmt::format("{:<9} {:<18} {:>7} {:>9.3f} {:>9} {:>10} {:>7.2f} {:>6.0f}%\n", "(triad)",
                     "a=b+s*c, STREAM", 12, triad.best_seconds * 1e3, "-", "-", triad.gb_per_s,
                     100.0);
  for (const auto& r : rows)
    out << fmt::format("{:<9} {:<18} {:>7} {:>9.3f} {:>9.3f} {:>10.1f} {:>7.2f} {:>6.0f}%\n",
                       r.optimizer, r.setting, r.bytes_per_param, r.best_seconds * 1e3,
                       r.median_seconds * 1e3, r.params_per_s / 1e6, r.gb_per_s,
                       100.0 * r.triad_ratio);
  return rows;
}

}  // namespace shardlab
