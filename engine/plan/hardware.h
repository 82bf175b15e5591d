// The machines a plan runs on: a GPU (peak matrix FLOP/s, HBM size and bandwidth) and a cluster
// of nodes (GPUs per node, the links inside a node and between nodes, as the bus bandwidth and
// latency of a ring collective). Presets from the vendors' data sheets and the NCCL maintainers'
// achievable figures (each figure is given beside its preset in hardware.cpp); `--cluster FILE`
// reads the same fields from JSON (cluster_from_json; cluster_to_json writes them).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "engine/plan/cpu_ops.h"

namespace shardlab::plan {

struct GpuSpec {
  std::string name;            // "a100-80gb"
  double peak_flops = 0;       // dense 16-bit matrix FLOP/s
  double hbm_bytes = 0;        // device memory
  double hbm_bytes_per_s = 0;  // its bandwidth
};

struct LinkSpec {
  double busbw_bytes_per_s = 0;  // a ring all-reduce's bus bandwidth per GPU
  double latency_s = 0;          // per ring step
};

struct ClusterSpec {
  std::string name;
  GpuSpec gpu;
  int gpus_per_node = 8;
  LinkSpec intra_node;  // NVLink
  LinkSpec inter_node;  // the GPU's own InfiniBand NIC
  // The share of peak_flops a transformer's matrix products reach, one figure for every layout.
  // 0.6 for A100 and H100: it puts every row of Narayanan et al. 2021's table 1 within 7% of its
  // published TFLOP/s (tests/plan/tst_plan_published.cpp), the only figures it was fitted to.
  double matmul_efficiency = 0.6;
  // Of the HBM, what a plan may use: the CUDA context, NCCL's buffers and the caching
  // allocator's fragmentation take the rest (PyTorch users see 5-10% of the card that way).
  double usable_memory_share = 0.9;
  // A machine measured by `shardlab plan --calibrate`: its kernels' costs on one core, which
  // `shardlab plan --job` needs (absent from the GPU presets).
  std::optional<CpuOpCosts> cpu_ops;
};

// The preset GPUs: a100-80gb, a100-40gb, h100-sxm, h200.
const std::vector<std::string>& gpu_names();
// InvalidArgument naming the choices for an unknown name.
GpuSpec gpu_preset(const std::string& name);
// A DGX-style cluster of `gpu` (8 per node; NVLink 3 and HDR for A100s, NVLink 4 and NDR for
// H100 and H200).
ClusterSpec cluster_preset(const std::string& gpu);

// JSON of a cluster: {"name", "gpu": {"name", "peak_tflops", "hbm_gib", "hbm_gb_per_second"},
// "gpus_per_node", "intra_node": {"busbw_gb_per_second", "latency_us"}, "inter_node": {...},
// "matmul_efficiency", "usable_memory_share"} and, when measured, "cpu_ops" (cpu_ops.h). Reading:
// FormatError naming the field that is missing or out of range; `origin` (a file name) starts the
// message.
ClusterSpec cluster_from_json(const nlohmann::json& j, const std::string& origin);
nlohmann::ordered_json cluster_to_json(const ClusterSpec& c);
// Reads a cluster file (IoError when unreadable, FormatError when it is not such a document).
ClusterSpec load_cluster_file(const std::string& path);

}  // namespace shardlab::plan
