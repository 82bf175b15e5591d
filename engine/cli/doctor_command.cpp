// `shardlab doctor [--device cuda|all] [--groups LIST] [--json]`: this node's checks
// (engine/doctor/doctor.h) as a table, one row per check with its figure and bound, or one JSON
// document. Exit status 0 when no check failed, 1 when one did, and 1 for --device cuda on a node
// where no GPU can be checked (the skip lines say why). `--cluster` runs the cluster check
// instead, under mpirun (doctor_cluster.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <iostream>

#include "engine/cli/args.h"
#include "engine/cli/command_spec.h"
#include "engine/cli/commands.h"
#include "engine/cli/doctor_cluster.h"
#include "engine/cli/json_output.h"
#include "engine/core/display_text.h"
#include "engine/core/error.h"
#include "engine/doctor/doctor.h"
#include "engine/launch/hosts.h"
#include "engine/launch/mpirun.h"

namespace shardlab::cli {
namespace {

using doctor::CheckResult;
using doctor::CheckStatus;

std::string figure_text(const CheckResult& c) {
  if (c.status == CheckStatus::kSkip && c.metric.empty()) return "";
  return fmt::format("{:.3g}", c.figure);
}

void print_rows(const doctor::CheckList& checks) {
  for (const CheckResult& c : checks) {
    if (c.status == CheckStatus::kSkip) {
      fmt::print("{:<9} {:<52} skip  {}\n", c.group, c.name, c.detail);
      continue;
    }
    std::string line =
        fmt::format("{:<9} {:<52} {:<4}  {} {} <= {:.3g}", c.group, c.name,
                    doctor::status_name(c.status), c.metric, figure_text(c), c.bound);
    if (c.status == CheckStatus::kFail && !c.detail.empty()) line += "  (" + c.detail + ")";
    fmt::print("{}\n", line);
  }
  std::fflush(stdout);
}

}  // namespace

int doctor_command(const std::vector<std::string>& argv) {
  Args args(argv, arg_spec("doctor"));
  args.expect_no_positional();
  if (args.has("--hosts") || args.has("--hostfile")) {
    // The cluster check started here: one rank per host under mpirun, with the settings and the
    // user's own MCA configuration of `shardlab run --hosts` (engine/launch/hosts.h).
    SL_ENFORCE_T(UsageError, !(args.has("--hosts") && args.has("--hostfile")),
                 "--hosts and --hostfile both name the hosts: give one of them");
    SL_ENFORCE_T(UsageError,
                 !args.has("--cluster") && !args.has("--device") && !args.has("--groups"),
                 "--hosts runs the cluster check (doctor --cluster) on those hosts: leave out "
                 "--cluster, --device and --groups");
    launch::HostList hosts = args.has("--hosts") ? launch::parse_hosts(args.get("--hosts"))
                                                 : launch::read_hostfile(args.get("--hostfile"));
    for (launch::HostSlots& h : hosts.hosts) h.slot_count = 1;
    hosts.hostfile.clear();
    const int n = static_cast<int>(hosts.hosts.size());
    std::vector<std::string> mpi = launch::cluster_mpirun_args(hosts, n, {});
    for (const std::string& a :
         {launch::this_executable(), std::string("doctor"), std::string("--cluster")})
      mpi.push_back(a);
    if (args.has("--json")) mpi.push_back("--json");
    return launch::run_mpirun(n, mpi);
  }
  if (args.has("--cluster")) {
    if (args.has("--device") || args.has("--groups"))
      SL_THROW(UsageError,
               "--cluster checks the hosts of an mpirun world, not this node's GPUs: leave out "
               "--device and --groups");
    return doctor_cluster(args);
  }
  const std::string device = args.get("--device", "all");
  if (device != "cuda" && device != "all")
    SL_THROW(UsageError, "--device: unknown device '{}' (known: cuda, all)", device);
  doctor::DoctorOptions options;
  if (args.has("--groups")) {
    const std::string list = args.get("--groups");
    size_t start = 0;
    while (start <= list.size()) {
      const size_t comma = list.find(',', start);
      const std::string g = list.substr(start, comma == std::string::npos ? comma : comma - start);
      if (!g.empty()) options.groups.push_back(g);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (options.groups.empty())
      SL_THROW(UsageError, "--groups: expected a comma-separated list such as kernels,model");
  }
  const bool json = args.has("--json");
  StdoutToStderr text_to_stderr(json);
  const doctor::DoctorReport report = doctor::run_doctor(
      options, [](const std::string&, const doctor::CheckList& results) { print_rows(results); });
  const int passed = doctor::count(report.checks, CheckStatus::kPass);
  const int failed = doctor::count(report.checks, CheckStatus::kFail);
  const int skipped = doctor::count(report.checks, CheckStatus::kSkip);
  const bool no_gpu = report.gpus.empty();
  fmt::print("doctor: node {}, {}\n", display_text(report.host),
             no_gpu ? "no usable GPU: " + report.no_gpu_reason
                    : fmt::format("{}", fmt::join(report.gpus, "; ")));
  fmt::print("doctor: {} passed, {} failed, {} skipped in {:.1f} s\n", passed, failed, skipped,
             report.seconds);
  const bool gpu_missing = device == "cuda" && no_gpu;
  if (gpu_missing)
    fmt::print("doctor: --device cuda, but this node has no GPU to check ({})\n",
               report.no_gpu_reason);
  std::fflush(stdout);
  if (json) {
    text_to_stderr.restore();
    Json doc{{"command", "doctor"},       {"host", report.host},
             {"gpus", report.gpus},       {"no_gpu_reason", report.no_gpu_reason},
             {"seconds", report.seconds}, {"passed", passed},
             {"failed", failed},          {"skipped", skipped},
             {"checks", Json::array()}};
    for (const CheckResult& c : report.checks)
      doc["checks"].push_back(Json{{"group", c.group},
                                   {"name", c.name},
                                   {"status", c.status == CheckStatus::kPass   ? "pass"
                                              : c.status == CheckStatus::kFail ? "fail"
                                                                               : "skip"},
                                   {"metric", c.metric},
                                   {"figure", c.figure},
                                   {"bound", c.bound},
                                   {"detail", c.detail}});
    print_json(doc);
  }
  return failed > 0 || gpu_missing ? 1 : 0;
}

}  // namespace shardlab::cli
