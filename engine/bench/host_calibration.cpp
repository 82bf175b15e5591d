#include "engine/bench/host_calibration.h"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <vector>

#include <fmt/format.h>

#include "engine/bench/comm_bench.h"
#include "engine/bench/cpu_op_calibration.h"
#include "engine/bench/harness.h"
#include "engine/bench/triad.h"
#include "engine/comm/threads/world.h"
#include "kernels/cpu/gemm.h"

namespace shardlab {
namespace {

double gemm_gflops() {
  constexpr int64_t n = 512;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.0f);
  const auto run = [&] {
    kernels::gemm(kernels::Trans::No, kernels::Trans::No, n, n, n, 1.0f, a.data(), n, b.data(), n,
                  0.0f, c.data(), n);
  };
  const double seconds = bench::best(bench::time_each(1, 5, run));
  return 2.0 * n * n * n / seconds / 1e9;
}

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

}  // namespace

HostCalibration calibrate_host() {
  HostCalibration out;
  kernels::use_single_blas_thread();
  out.cores = std::max(1, bench::usable_cores());
  out.gemm_gflops = gemm_gflops();
  out.triad_gb_per_s = measure_triad(int64_t{8} << 20, 5).gb_per_s;
  // The threads backend's all-reduce on every core: latency from the smallest size, bandwidth
  // from the largest.
  const int ranks = std::max(2, out.cores);
  CommBenchOptions o;
  o.min_bytes = 4096;
  o.max_bytes = int64_t{16} << 20;
  o.step_factor = 4096;  // just the two sizes
  o.ops = {CommOp::AllReduce};
  std::vector<CommBenchRow> rows;
  run_threads(ranks, CommOptions{}, [&](Communicator& comm) {
    std::vector<CommBenchRow> r = bench_collectives(comm, o, nullptr);
    if (comm.rank() == 0) rows = std::move(r);
  });
  SL_ENFORCE_T(InternalError, rows.size() == 2, "calibration: expected 2 all-reduce sizes, got {}",
               rows.size());
  out.all_reduce_latency_us = rows.front().seconds / (2.0 * (ranks - 1)) * 1e6;
  out.all_reduce_busbw_gb_per_s = rows.back().busbw_gbs;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  out.host = host;
  out.date = utc_now();

  plan::ClusterSpec& c = out.cluster;
  c.name = out.host;
  c.gpu.name = "cpu-core";
  c.gpu.peak_flops = out.gemm_gflops * 1e9;
  const double ram =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  c.gpu.hbm_bytes = ram / out.cores;
  c.gpu.hbm_bytes_per_s = out.triad_gb_per_s * 1e9;
  c.gpus_per_node = out.cores;
  c.intra_node = {out.all_reduce_busbw_gb_per_s * 1e9, out.all_reduce_latency_us * 1e-6};
  c.inter_node = c.intra_node;
  c.matmul_efficiency = 1.0;
  c.cpu_ops = measure_cpu_ops(out.cores);
  return out;
}

nlohmann::ordered_json calibration_json(const HostCalibration& c) {
  nlohmann::ordered_json j = plan::cluster_to_json(c.cluster);
  j["measured"] = {{"date", c.date},
                   {"host", c.host},
                   {"cores", c.cores},
                   {"gemm_gflops", c.gemm_gflops},
                   {"triad_gb_per_second", c.triad_gb_per_s},
                   {"all_reduce_latency_us", c.all_reduce_latency_us},
                   {"all_reduce_busbw_gb_per_second", c.all_reduce_busbw_gb_per_s}};
  return j;
}

}  // namespace shardlab
