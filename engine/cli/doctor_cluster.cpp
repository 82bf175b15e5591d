// `shardlab doctor --cluster [--json]` (doctor_cluster.h): an MPI world as `shardlab worker` makes
// it, measure_cluster on every rank, judge_cluster and the report on rank 0.
#include "engine/cli/doctor_cluster.h"

#include <fmt/format.h>

#include <cstdio>

#include "engine/cli/json_output.h"
#include "engine/core/display_text.h"
#include "engine/core/error.h"
#include "engine/doctor/cluster_checks.h"

#if defined(SHARDLAB_HAVE_MPI) && SHARDLAB_HAVE_MPI
#include "engine/comm/mpi/world.h"
#endif

namespace shardlab::cli {
namespace {

constexpr const char* kHowToRun =
    "doctor --cluster runs under mpirun with one rank per host, e.g. mpirun --host h0,h1,h2,h3 "
    "-np 4 shardlab doctor --cluster";

#if defined(SHARDLAB_HAVE_MPI) && SHARDLAB_HAVE_MPI
void print_report(const doctor::ClusterMeasurements& m, const doctor::ClusterVerdict& v) {
  const size_t n = m.hosts.size();
  fmt::print(
      "doctor --cluster: {} ranks measured in {:.1f} s (GEMM and memory one host at a "
      "time, links one pair at a time)\n",
      n, m.seconds);
  fmt::print("{:<5} {:<24} {:>12} {:>12} {:>14} {:>14}\n", "rank", "host", "GEMM GFLOP/s", "memory",
             "link (median)", "latency (med)");
  for (size_t r = 0; r < n; ++r)
    fmt::print("{:<5} {:<24} {:>12.1f} {:>12} {:>14} {:>14}\n", r, display_text(m.hosts[r].host),
               m.hosts[r].gemm_gflops, doctor::bandwidth_text(m.hosts[r].memory_gb_per_s),
               doctor::bandwidth_text(v.host_link_gb_per_s[r]),
               doctor::latency_text(v.host_latency_us[r]));
  fmt::print("pair bandwidth (4 MiB ping-pong, best of 3), rank by rank:\n{:<5}", "");
  for (size_t c = 0; c < n; ++c) fmt::print(" {:>11}", c);
  fmt::print("\n");
  for (size_t r = 0; r < n; ++r) {
    fmt::print("{:<5}", r);
    for (size_t c = 0; c < n; ++c)
      fmt::print(" {:>11}", r == c ? "-" : doctor::bandwidth_text(m.link_gb_per_s[r][c]));
    fmt::print("\n");
  }
  for (const std::string& note : v.notes) fmt::print("note: {}\n", note);
  for (const std::string& f : v.findings) fmt::print("FINDING: {}\n", f);
  if (v.findings.empty())
    fmt::print("doctor --cluster: no host or link out of line\n");
  else
    fmt::print("doctor --cluster: {} finding{}\n", v.findings.size(),
               v.findings.size() == 1 ? "" : "s");
  std::fflush(stdout);
}
#endif

}  // namespace

int doctor_cluster(const Args& args) {
#if !(defined(SHARDLAB_HAVE_MPI) && SHARDLAB_HAVE_MPI)
  (void)args;
  SL_THROW(InvalidArgument,
           "doctor --cluster: this build has no MPI (install libopenmpi-dev and rebuild); {}",
           kHowToRun);
#else
  const bool json = args.has("--json");
  MpiSession session(nullptr, nullptr);
  SL_ENFORCE(session.world_size() >= 2,
             "a world of 1 rank here (not started by mpirun, or -np 1): {}", kHowToRun);
  // The default bound on every wait (60 s) is far above one host's GEMM and triad or one pair's
  // ping-pongs, the longest any rank waits here.
  auto world = make_mpi_world(CommOptions{});
  const doctor::ClusterMeasurements m = doctor::measure_cluster(*world);
  // Every rank judges (every rank holds the measurements), so every rank exits alike.
  const doctor::ClusterVerdict v = doctor::judge_cluster(m);
  const int status = v.findings.empty() ? 0 : 1;
  if (world->rank() != 0) return status;
  {
    StdoutToStderr text_to_stderr(json);
    print_report(m, v);
  }
  if (json) {
    Json doc{{"command", "doctor --cluster"}};
    doc.update(doctor::cluster_json(m, v));
    print_json(doc);
  }
  return status;
#endif
}

}  // namespace shardlab::cli
