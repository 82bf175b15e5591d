#include "engine/plan/cpu_ops.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "engine/core/error.h"

namespace shardlab::plan {
namespace {

constexpr std::array<const char*, static_cast<size_t>(CpuOp::count)> kNames = {
    "add",
    "bias_add",
    "bias_grad",
    "relu_forward",
    "relu_backward",
    "gelu_forward",
    "gelu_backward",
    "layer_norm_forward",
    "layer_norm_backward",
    "xent_forward",
    "xent_backward",
    "embedding_forward",
    "embedding_backward",
    "attention_softmax",
    "adam",
    "sgd",
    "rmsprop",
    "adagrad",
    "zero",
    "copy",
    "grad_norm",
    "gather"};

// Where x falls on the grid: the lower index and the weight of the upper one, in log2 space.
std::pair<size_t, double> locate(const std::vector<int64_t>& sizes, int64_t x) {
  const double lx = std::log2(static_cast<double>(std::max<int64_t>(x, 1)));
  if (sizes.size() == 1 || lx <= std::log2(static_cast<double>(sizes.front()))) return {0, 0.0};
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    const double lo = std::log2(static_cast<double>(sizes[i]));
    const double hi = std::log2(static_cast<double>(sizes[i + 1]));
    if (lx <= hi) return {i, (lx - lo) / (hi - lo)};
  }
  return {sizes.size() - 2, 1.0};
}

// Linear between the points (x ascending), clamped at both ends.
template <class T, class X, class Y>
double interpolate(const std::vector<T>& points, double x, X xs, Y ys) {
  if (points.empty()) return 0;
  if (x <= xs(points.front())) return ys(points.front());
  for (size_t i = 0; i + 1 < points.size(); ++i) {
    const T& a = points[i];
    const T& b = points[i + 1];
    if (x <= xs(b)) return ys(a) + (ys(b) - ys(a)) * (x - xs(a)) / (xs(b) - xs(a));
  }
  return ys(points.back());
}

std::vector<CpuOpCosts::Sync> syncs_from_json(const nlohmann::json& j, const char* key,
                                              const std::string& where) {
  SL_ENFORCE_T(FormatError, j.contains(key) && j.at(key).is_array() && !j.at(key).empty(),
               "{}: needs an array '{}' of {{ranks_per_core, us}}", where, key);
  std::vector<CpuOpCosts::Sync> out;
  for (const auto& e : j.at(key)) {
    SL_ENFORCE_T(FormatError,
                 e.is_object() && e.contains("ranks_per_core") &&
                     e.at("ranks_per_core").is_number() && e.contains("us") &&
                     e.at("us").is_number(),
                 "{}: each {} entry needs numbers 'ranks_per_core' and 'us'", where, key);
    const double r = e.at("ranks_per_core").get<double>(), us = e.at("us").get<double>();
    SL_ENFORCE_T(FormatError, r >= 1 && r <= 1024 && us >= 0 && us < 1e7,
                 "{}: {} entry out of range (ranks_per_core {}, us {})", where, key, r, us);
    SL_ENFORCE_T(FormatError, out.empty() || r > out.back().ranks_per_core,
                 "{}: {} entries must ascend in ranks_per_core", where, key);
    out.push_back({r, us * 1e-6});
  }
  return out;
}

}  // namespace

const char* cpu_op_name(CpuOp op) {
  return kNames[static_cast<size_t>(op)];
}

double CpuOpCosts::gemm_seconds(int64_t m, int64_t n, int64_t k) const {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  const size_t s = gemm_sizes.size();
  const auto [im, wm] = locate(gemm_sizes, m);
  const auto [in, wn] = locate(gemm_sizes, n);
  const auto [ik, wk] = locate(gemm_sizes, k);
  const auto at = [&](size_t a, size_t b, size_t c) {
    a = std::min(a, s - 1), b = std::min(b, s - 1), c = std::min(c, s - 1);
    return gemm_gflops[(a * s + b) * s + c];
  };
  double rate = 0;
  for (int da = 0; da < 2; ++da)
    for (int db = 0; db < 2; ++db)
      for (int dc = 0; dc < 2; ++dc) {
        const double w = (da ? wm : 1 - wm) * (db ? wn : 1 - wn) * (dc ? wk : 1 - wk);
        if (w > 0) rate += w * at(im + da, in + db, ik + dc);
      }
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) /
         (rate * 1e9);
}

double CpuOpCosts::sync_seconds(double ranks_per_core, const std::string& backend) const {
  SL_ENFORCE(backend == "threads" || !sync_mpi.empty(),
             "the cluster file has no measured meeting cost for backend {} (shardlab plan "
             "--calibrate measures mpi where this shardlab has MPI)",
             backend);
  const std::vector<Sync>& sync = backend == "threads" ? this->sync : sync_mpi;
  return interpolate(
      sync, ranks_per_core, [](const Sync& p) { return p.ranks_per_core; },
      [](const Sync& p) { return p.seconds; });
}

double CpuOpCosts::in_step_factor(double ranks_per_core) const {
  if (in_step.empty()) return 1.0;
  return interpolate(
      in_step, ranks_per_core, [](const InStep& p) { return p.ranks_per_core; },
      [](const InStep& p) { return p.factor; });
}

nlohmann::ordered_json cpu_ops_to_json(const CpuOpCosts& c) {
  nlohmann::ordered_json ns;
  for (size_t i = 0; i < kNames.size(); ++i) ns[kNames[i]] = c.ns_per_element[i];
  const auto syncs = [](const std::vector<CpuOpCosts::Sync>& v) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const CpuOpCosts::Sync& s : v)
      a.push_back({{"ranks_per_core", s.ranks_per_core}, {"us", s.seconds * 1e6}});
    return a;
  };
  nlohmann::ordered_json j = {{"gemm", {{"sizes", c.gemm_sizes}, {"gflops", c.gemm_gflops}}},
                              {"ns_per_element", ns},
                              {"sync", syncs(c.sync)}};
  if (!c.sync_mpi.empty()) j["sync_mpi"] = syncs(c.sync_mpi);
  nlohmann::ordered_json in_step = nlohmann::ordered_json::array();
  for (const CpuOpCosts::InStep& p : c.in_step)
    in_step.push_back({{"ranks_per_core", p.ranks_per_core}, {"factor", p.factor}});
  j["in_step"] = in_step;
  return j;
}

CpuOpCosts cpu_ops_from_json(const nlohmann::json& j, const std::string& origin) {
  const std::string where = origin + ": cpu_ops";
  SL_ENFORCE_T(FormatError, j.is_object() && j.contains("gemm") && j.at("gemm").is_object(),
               "{}: needs an object 'gemm'", where);
  const nlohmann::json& g = j.at("gemm");
  CpuOpCosts c;
  SL_ENFORCE_T(FormatError,
               g.contains("sizes") && g.at("sizes").is_array() && g.at("sizes").size() >= 2 &&
                   g.at("sizes").size() <= 16,
               "{}: gemm.sizes must be 2 to 16 sizes", where);
  for (const auto& v : g.at("sizes")) {
    SL_ENFORCE_T(FormatError, v.is_number_integer() && v.get<int64_t>() >= 1,
                 "{}: gemm.sizes must be positive integers", where);
    SL_ENFORCE_T(FormatError, c.gemm_sizes.empty() || v.get<int64_t>() > c.gemm_sizes.back(),
                 "{}: gemm.sizes must ascend", where);
    c.gemm_sizes.push_back(v.get<int64_t>());
  }
  const size_t s = c.gemm_sizes.size();
  SL_ENFORCE_T(
      FormatError,
      g.contains("gflops") && g.at("gflops").is_array() && g.at("gflops").size() == s * s * s,
      "{}: gemm.gflops must hold {} rates (sizes cubed)", where, s * s * s);
  for (const auto& v : g.at("gflops")) {
    SL_ENFORCE_T(FormatError, v.is_number() && v.get<double>() > 0 && v.get<double>() < 1e7,
                 "{}: gemm.gflops must be positive rates", where);
    c.gemm_gflops.push_back(v.get<double>());
  }
  SL_ENFORCE_T(FormatError, j.contains("ns_per_element") && j.at("ns_per_element").is_object(),
               "{}: needs an object 'ns_per_element'", where);
  const nlohmann::json& ns = j.at("ns_per_element");
  for (size_t i = 0; i < kNames.size(); ++i) {
    SL_ENFORCE_T(FormatError, ns.contains(kNames[i]) && ns.at(kNames[i]).is_number(),
                 "{}: ns_per_element needs a number '{}'", where, kNames[i]);
    const double v = ns.at(kNames[i]).get<double>();
    SL_ENFORCE_T(FormatError, v >= 0 && v < 1e9,
                 "{}: ns_per_element.{} must be in [0, 1e9), got {}", where, kNames[i], v);
    c.ns_per_element[i] = v;
  }
  c.sync = syncs_from_json(j, "sync", where);
  if (j.contains("sync_mpi")) c.sync_mpi = syncs_from_json(j, "sync_mpi", where);
  SL_ENFORCE_T(FormatError, j.contains("in_step") && j.at("in_step").is_array(),
               "{}: needs an array 'in_step' of {{ranks_per_core, factor}}", where);
  for (const auto& e : j.at("in_step")) {
    SL_ENFORCE_T(FormatError,
                 e.is_object() && e.contains("ranks_per_core") &&
                     e.at("ranks_per_core").is_number() && e.contains("factor") &&
                     e.at("factor").is_number(),
                 "{}: each in_step entry needs numbers 'ranks_per_core' and 'factor'", where);
    const double r = e.at("ranks_per_core").get<double>(), f = e.at("factor").get<double>();
    SL_ENFORCE_T(FormatError, r > 0 && r <= 1024 && f > 0 && f < 100,
                 "{}: in_step entry out of range (ranks_per_core {}, factor {})", where, r, f);
    SL_ENFORCE_T(FormatError, c.in_step.empty() || r > c.in_step.back().ranks_per_core,
                 "{}: in_step entries must ascend in ranks_per_core", where);
    c.in_step.push_back({r, f});
  }
  return c;
}

}  // namespace shardlab::plan
