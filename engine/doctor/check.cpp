#include "engine/doctor/check.h"

#include <fmt/format.h>

#include <cmath>
#include <exception>
#include <utility>

#include "engine/core/device.h"
#include "engine/run/device_training.h"

namespace shardlab::doctor {

const char* status_name(CheckStatus s) {
  switch (s) {
    case CheckStatus::kPass:
      return "pass";
    case CheckStatus::kFail:
      return "FAIL";
    case CheckStatus::kSkip:
      return "skip";
  }
  return "?";
}

CheckResult bounded(std::string group, std::string name, std::string metric, double figure,
                    double bound, std::string detail) {
  CheckResult r;
  r.group = std::move(group);
  r.name = std::move(name);
  r.metric = std::move(metric);
  r.figure = figure;
  r.bound = bound;
  r.status = std::isfinite(figure) && figure <= bound ? CheckStatus::kPass : CheckStatus::kFail;
  r.detail = std::move(detail);
  return r;
}

CheckResult skipped(std::string group, std::string name, std::string why) {
  CheckResult r;
  r.group = std::move(group);
  r.name = std::move(name);
  r.status = CheckStatus::kSkip;
  r.detail = std::move(why);
  return r;
}

CheckResult failed(std::string group, std::string name, std::string why) {
  CheckResult r;
  r.group = std::move(group);
  r.name = std::move(name);
  r.status = CheckStatus::kFail;
  r.detail = std::move(why);
  return r;
}

void guarded(CheckList& out, const std::string& group, const std::string& name,
             const std::function<void(CheckList&)>& body) {
  try {
    body(out);
  } catch (const std::exception& e) {
    out.push_back(failed(group, name, e.what()));
  }
}

std::string gpu_skip_reason(int device) {
  if (!device_training_built())
    return "this shardlab was built without the CUDA kernels (nvcc was not found when it was "
           "built)";
  std::string why;
  const int gpus = usable_gpus(&why);
  if (gpus == 0) return "no usable GPU: " + why;
  if (device < 0 || device >= gpus)
    return fmt::format("no usable GPU: there is no CUDA device {} ({} visible)", device, gpus);
  if (std::string p = gpu_problem(device); !p.empty()) return "no usable GPU: " + p;
  return {};
}

bool all_passed(const CheckList& checks) {
  return count(checks, CheckStatus::kFail) == 0;
}

int count(const CheckList& checks, CheckStatus s) {
  int n = 0;
  for (const CheckResult& c : checks) n += c.status == s ? 1 : 0;
  return n;
}

}  // namespace shardlab::doctor
