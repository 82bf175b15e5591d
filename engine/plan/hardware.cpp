#include "engine/plan/hardware.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "engine/core/error.h"

namespace shardlab::plan {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

// Memory as nvidia-smi reports it (A100 80GB: 81,920 MiB; H200: 143,771 MiB); bandwidths and
// peaks from NVIDIA's data sheets (dense, no sparsity).
const std::vector<GpuSpec>& gpus() {
  static const std::vector<GpuSpec> g{
      {"a100-80gb", 312e12, 80 * kGiB, 2.039e12},
      {"a100-40gb", 312e12, 40 * kGiB, 1.555e12},
      {"h100-sxm", 989e12, 80 * kGiB, 3.35e12},
      {"h200", 989e12, 140 * kGiB, 4.8e12},
  };
  return g;
}

double number(const nlohmann::json& j, const char* key, const std::string& where, double lo,
              double hi) {
  SL_ENFORCE_T(FormatError, j.is_object() && j.contains(key) && j.at(key).is_number(),
               "{}: needs a number '{}'", where, key);
  const double v = j.at(key).get<double>();
  SL_ENFORCE_T(FormatError, v >= lo && v <= hi, "{}: '{}' must be in [{}, {}], got {}", where, key,
               lo, hi, v);
  return v;
}

LinkSpec link_from(const nlohmann::json& j, const char* key, const std::string& origin) {
  SL_ENFORCE_T(FormatError, j.contains(key) && j.at(key).is_object(), "{}: needs an object '{}'",
               origin, key);
  const std::string where = fmt::format("{}: {}", origin, key);
  return {number(j.at(key), "busbw_gb_per_second", where, 1e-6, 1e6) * 1e9,
          number(j.at(key), "latency_us", where, 0, 1e6) * 1e-6};
}

}  // namespace

const std::vector<std::string>& gpu_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const GpuSpec& g : gpus()) n.push_back(g.name);
    return n;
  }();
  return names;
}

GpuSpec gpu_preset(const std::string& name) {
  for (const GpuSpec& g : gpus())
    if (g.name == name) return g;
  SL_THROW(InvalidArgument, "gpu must be one of {}, got '{}'", fmt::join(gpu_names(), ", "), name);
}

ClusterSpec cluster_preset(const std::string& gpu) {
  ClusterSpec c;
  c.gpu = gpu_preset(gpu);
  c.gpus_per_node = 8;
  const bool ampere = gpu.starts_with("a100");
  c.name = ampere ? "dgx-a100" : (gpu == "h200" ? "dgx-h200" : "dgx-h100");
  // All-reduce bus bandwidth NCCL reaches: about 230 GB/s on A100 NVLink, 370 GB/s on H100's;
  // per NIC about 24 GB/s on HDR (200 Gb/s) and 46 GB/s on NDR (400 Gb/s). Latency per ring
  // step: a few microseconds inside a node, about ten across InfiniBand.
  c.intra_node = {ampere ? 230e9 : 370e9, 5e-6};
  c.inter_node = {ampere ? 24e9 : 46e9, 10e-6};
  return c;
}

ClusterSpec cluster_from_json(const nlohmann::json& j, const std::string& origin) {
  SL_ENFORCE_T(FormatError, j.is_object(), "{}: a cluster file is one JSON object", origin);
  ClusterSpec c;
  c.name =
      j.contains("name") && j.at("name").is_string() ? j.at("name").get<std::string>() : "custom";
  SL_ENFORCE_T(FormatError, j.contains("gpu") && j.at("gpu").is_object(),
               "{}: needs an object 'gpu'", origin);
  const nlohmann::json& g = j.at("gpu");
  const std::string where = origin + ": gpu";
  c.gpu.name =
      g.contains("name") && g.at("name").is_string() ? g.at("name").get<std::string>() : "custom";
  c.gpu.peak_flops = number(g, "peak_tflops", where, 1e-6, 1e6) * 1e12;
  c.gpu.hbm_bytes = number(g, "hbm_gib", where, 1e-3, 1e6) * kGiB;
  c.gpu.hbm_bytes_per_s = number(g, "hbm_gb_per_second", where, 1e-3, 1e7) * 1e9;
  c.gpus_per_node = static_cast<int>(number(j, "gpus_per_node", origin, 1, 1024));
  c.intra_node = link_from(j, "intra_node", origin);
  c.inter_node = link_from(j, "inter_node", origin);
  c.matmul_efficiency = number(j, "matmul_efficiency", origin, 1e-4, 1);
  if (j.contains("usable_memory_share"))
    c.usable_memory_share = number(j, "usable_memory_share", origin, 0.01, 1);
  if (j.contains("cpu_ops")) c.cpu_ops = cpu_ops_from_json(j.at("cpu_ops"), origin);
  return c;
}

nlohmann::ordered_json cluster_to_json(const ClusterSpec& c) {
  nlohmann::ordered_json j;
  j["name"] = c.name;
  j["gpu"] = {{"name", c.gpu.name},
              {"peak_tflops", c.gpu.peak_flops / 1e12},
              {"hbm_gib", c.gpu.hbm_bytes / kGiB},
              {"hbm_gb_per_second", c.gpu.hbm_bytes_per_s / 1e9}};
  j["gpus_per_node"] = c.gpus_per_node;
  j["intra_node"] = {{"busbw_gb_per_second", c.intra_node.busbw_bytes_per_s / 1e9},
                     {"latency_us", c.intra_node.latency_s * 1e6}};
  j["inter_node"] = {{"busbw_gb_per_second", c.inter_node.busbw_bytes_per_s / 1e9},
                     {"latency_us", c.inter_node.latency_s * 1e6}};
  j["matmul_efficiency"] = c.matmul_efficiency;
  j["usable_memory_share"] = c.usable_memory_share;
  if (c.cpu_ops) j["cpu_ops"] = cpu_ops_to_json(*c.cpu_ops);
  return j;
}

ClusterSpec load_cluster_file(const std::string& path) {
  std::ifstream in(path);
  SL_ENFORCE_T(IoError, in.good(), "--cluster: cannot read '{}'", path);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  SL_ENFORCE_T(FormatError, !j.is_discarded(), "{}: not valid JSON", path);
  return cluster_from_json(j, path);
}

}  // namespace shardlab::plan
