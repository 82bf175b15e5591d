#include "engine/doctor/doctor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>

#include "engine/core/device.h"
#include "engine/core/error.h"
#include "engine/doctor/kernel_checks.h"
#include "engine/doctor/model_checks.h"
#include "engine/doctor/nccl_checks.h"
#include "engine/doctor/training_checks.h"

namespace shardlab::doctor {

const std::vector<std::string>& group_names() {
  static const std::vector<std::string> names = {"kernels", "model", "training", "memory", "nccl"};
  return names;
}

DoctorReport run_doctor(const DoctorOptions& options,
                        const std::function<void(const std::string&, const CheckList&)>& on_group) {
  const std::vector<std::string>& all = group_names();
  for (const std::string& g : options.groups)
    SL_ENFORCE(std::find(all.begin(), all.end(), g) != all.end(),
               "--groups: unknown group '{}' (known: {})", g, fmt::join(all, ", "));
  const auto start = std::chrono::steady_clock::now();
  DoctorReport report;
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) == 0) report.host = host.data();
  const int gpus = usable_gpus(&report.no_gpu_reason);
  for (int g = 0; g < gpus; ++g) report.gpus.push_back(describe_gpu(g));
  for (const std::string& group : all) {
    if (!options.groups.empty() &&
        std::find(options.groups.begin(), options.groups.end(), group) == options.groups.end())
      continue;
    CheckList results;
    if (group == "kernels")
      results = kernel_checks(0);
    else if (group == "model")
      results = gpu_model_checks(0);
    else if (group == "training")
      results = training_checks(0);
    else if (group == "memory")
      results = memory_checks(0);
    else
      results = nccl_checks();
    if (on_group) on_group(group, results);
    report.checks.insert(report.checks.end(), results.begin(), results.end());
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace shardlab::doctor
