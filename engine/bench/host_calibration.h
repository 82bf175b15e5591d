// This machine measured as a plan's cluster (engine/plan/hardware.h), for `shardlab plan
// --calibrate`: each rank of a ShardLab job here is a thread on a core, so the "GPU" of the
// cluster file is one core: its fp32 GEMM rate (OpenBLAS, one thread, 512 x 512 x 512) as the peak
// with a matmul efficiency of 1 (the figure is what a GEMM reaches), its share of the memory and
// the single-core triad bandwidth; "a node" is this host's usable cores, its links the threads
// backend's all-reduce (latency per ring step from 4 KiB, bus bandwidth from 16 MiB, ranks = the
// cores). Between hosts the same figures stand in unless `shardlab plan --calibrate --links FILE`
// reads the links `shardlab doctor --hosts` measured (engine/cli/plan_job.cpp).
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "engine/plan/hardware.h"

namespace shardlab {

struct HostCalibration {
  plan::ClusterSpec cluster;
  int cores = 0;
  double gemm_gflops = 0;            // one core
  double triad_gb_per_s = 0;         // one core
  double all_reduce_latency_us = 0;  // threads backend, per ring step
  double all_reduce_busbw_gb_per_s = 0;
  std::string host, date;  // where and when (UTC)
};

// Takes some seconds. Throws what the measurements throw (InvalidArgument, TimeoutError).
HostCalibration calibrate_host();

// The cluster file: plan::cluster_to_json plus "measured" {date, host, cores, gemm_gflops,
// triad_gb_per_second, all_reduce_latency_us, all_reduce_busbw_gb_per_second}, which the reader
// ignores.
nlohmann::ordered_json calibration_json(const HostCalibration& c);

}  // namespace shardlab
