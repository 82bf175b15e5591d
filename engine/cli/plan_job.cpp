#include "engine/cli/plan_job.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "engine/bench/cpu_op_calibration.h"
#include "engine/bench/harness.h"
#include "engine/bench/host_calibration.h"
#include "engine/cli/json_output.h"
#include "engine/core/atomic_file.h"
#include "engine/launch/mpirun.h"
#include "engine/launch/prepared_job.h"
#include "engine/plan/job/job_estimate.h"
#if SHARDLAB_HAVE_MPI
#include "engine/comm/mpi/world.h"
#endif

namespace shardlab::cli {
namespace {

// The mpi backend's meetings at 1 and 2 ranks per core: this command again under mpirun
// (--calibrate-mpi-inner), its rank 0 writing the loop's seconds to a temporary file. Not
// measured (and said so) without MPI or when mpirun fails.
void measure_mpi_meetings(HostCalibration& c) {
#if SHARDLAB_HAVE_MPI
  const double work = sync_work_seconds();
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / fmt::format("shardlab-calibrate-{}.txt", ::getpid());
  for (int per_core : {1, 2}) {
    const int ranks = std::max(2, per_core * c.cores);
    std::fflush(stdout);
    const int rc = launch::run_mpirun(
        ranks, {launch::this_executable(), "plan", "--calibrate-mpi-inner", "--out", tmp.string()});
    std::ifstream in(tmp);
    double wall = 0;
    if (rc != 0 || !(in >> wall) || !(wall > 0)) {
      fmt::print(stderr, "mpi meetings not measured: mpirun -np {} exited with status {}\n", ranks,
                 rc);
      c.cluster.cpu_ops->sync_mpi.clear();
      break;
    }
    c.cluster.cpu_ops->sync_mpi.push_back(sync_cost(wall, work, ranks, c.cores));
  }
  std::error_code ec;
  std::filesystem::remove(tmp, ec);
#else
  (void)c;
  fmt::print(stderr, "mpi meetings not measured: this shardlab was built without MPI\n");
#endif
}

// --links FILE: `shardlab doctor --cluster --json`'s pairs (every pair of hosts measured one at a
// time) as the cluster's links between nodes: the median pair's bandwidth and latency. A ring's
// bus bandwidth is its slowest link's (NCCL's performance notes: busbw compares to the hardware
// link speed), so a pair's point-to-point figure stands for it. Sets `note` when the doctor found
// its ranks sharing hosts (then the pairs are not the network).
plan::LinkSpec links_from_doctor(const std::string& path, std::string& note, size_t& pairs) {
  std::ifstream in(path);
  SL_ENFORCE_T(IoError, in.good(), "--links: cannot read '{}'", path);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  SL_ENFORCE_T(FormatError, !j.is_discarded() && j.is_object(), "{}: not a JSON object", path);
  SL_ENFORCE_T(FormatError,
               j.value("command", std::string()) == "doctor --cluster" && j.contains("pairs") &&
                   j.at("pairs").is_array() && !j.at("pairs").empty(),
               "{}: not the output of shardlab doctor --cluster --json (no pairs of hosts)", path);
  std::vector<double> gbs, lat;
  for (const auto& p : j.at("pairs")) {
    SL_ENFORCE_T(FormatError,
                 p.is_object() && p.contains("gb_per_second") &&
                     p.at("gb_per_second").is_number() && p.at("gb_per_second").get<double>() > 0 &&
                     p.contains("latency_us") && p.at("latency_us").is_number() &&
                     p.at("latency_us").get<double>() >= 0,
                 "{}: each pair needs a positive gb_per_second and a latency_us", path);
    gbs.push_back(p.at("gb_per_second").get<double>());
    lat.push_back(p.at("latency_us").get<double>());
  }
  pairs = gbs.size();
  if (j.contains("notes") && j.at("notes").is_array())
    for (const auto& n : j.at("notes"))
      if (n.is_string() && n.get<std::string>().find("not the network") != std::string::npos)
        note = n.get<std::string>();
  return {bench::median(gbs) * 1e9, bench::median(lat) * 1e-6};
}

}  // namespace

// --calibrate: this machine as a cluster file (engine/bench/host_calibration.h).
int plan_calibrate(const Args& args) {
  // The links file first: a wrong one is said before the seconds of measuring.
  std::string note;
  size_t pairs = 0;
  std::optional<plan::LinkSpec> links;
  if (args.has("--links")) links = links_from_doctor(args.get("--links"), note, pairs);
  fmt::print(stderr, "measuring this machine (about ten seconds)...\n");
  HostCalibration c = calibrate_host();
  measure_mpi_meetings(c);
  nlohmann::ordered_json doc = calibration_json(c);
  if (links) {
    const plan::LinkSpec link = *links;
    c.cluster.inter_node = link;
    doc = calibration_json(c);
    doc["measured"]["links"] = {{"file", args.get("--links")}, {"pairs", pairs}};
    fmt::print(stderr, "between nodes: {:.2f} GB/s, {:.1f} us (the median of {} pairs in {}){}\n",
               link.busbw_bytes_per_s / 1e9, link.latency_s * 1e6, pairs, args.get("--links"),
               note.empty() ? "" : "; " + note);
  }
  const std::string text = doc.dump(2) + "\n";
  fmt::print(stderr,
             "{}: {} cores; GEMM {:.1f} GFLOP/s a core, triad {:.1f} GB/s a core, all-reduce "
             "(threads, {} ranks) {:.1f} us a ring step, {:.2f} GB/s bus bandwidth\n",
             c.date, c.cores, c.gemm_gflops, c.triad_gb_per_s, std::max(2, c.cores),
             c.all_reduce_latency_us, c.all_reduce_busbw_gb_per_s);
  const auto meetings = [](const std::vector<plan::CpuOpCosts::Sync>& v) {
    std::string s;
    for (const plan::CpuOpCosts::Sync& m : v)
      s += fmt::format("{}{:.1f} us at {:g} per core", s.empty() ? "" : ", ", m.seconds * 1e6,
                       m.ranks_per_core);
    return s.empty() ? std::string("not measured") : s;
  };
  fmt::print(stderr, "ranks meeting: threads {}; mpi {}\n", meetings(c.cluster.cpu_ops->sync),
             meetings(c.cluster.cpu_ops->sync_mpi));
  const std::string out = args.get("--out");
  if (out.empty()) {
    fmt::print("{}", text);
    return 0;
  }
  write_file_atomic(out, text);
  fmt::print(stderr, "wrote {}\n", out);
  return 0;
}

// --job: a ShardLab job on a calibrated machine (engine/plan/job).
int plan_job(const Args& args) {
  SL_ENFORCE_T(UsageError, args.has("--cluster"),
               "plan --job: needs --cluster FILE, this machine measured by shardlab plan "
               "--calibrate --out FILE");
  for (const char* flag : {"--model", "--gpu", "--gpus", "--global-batch", "--tp", "--pp", "--dp",
                           "--zero", "--top", "--print-cluster"})
    SL_ENFORCE_T(UsageError, !args.has(flag),
                 "plan --job: {} does not apply (the job file lays the job out; --set changes it)",
                 flag);
  const plan::ClusterSpec cluster = plan::load_cluster_file(args.get("--cluster"));
  const JobSpec job = launch::prepare_job(load_job(args.get("--job"), args.all("--set"))).job;
  const plan::JobEstimate e = plan::estimate_job(job, cluster);
  if (args.has("--json")) {
    print_json(plan::job_estimate_to_json(job, e));
    return 0;
  }
  const plan::JobTime& t = e.time;
  fmt::print("job {}: {} {}, {} rank{} on {} cores ({})\n", job.name, job.model.kind,
             job.parallel.strategy, e.ranks, e.ranks == 1 ? "" : "s", e.cores, cluster.name);
  fmt::print(
      "step {:.2f} ms: compute {:.2f} / tp {:.2f} / pp {:.2f} / dp {:.2f} / bubble {:.2f} / "
      "optimizer {:.2f} ms\n",
      e.step_seconds * 1e3, t.compute * 1e3, t.tp * 1e3, t.pp * 1e3, t.dp * 1e3, t.bubble * 1e3,
      t.optimizer * 1e3);
  fmt::print("why: {}\n", e.why);
  for (size_t r = 0; r < e.memory.size(); ++r) {
    const MemoryFigures& f = e.memory[r];
    fmt::print("rank {}: params {} B, grads {} B, optimizer state {} B\n", r,
               f[MemCategory::params], f[MemCategory::grads], f[MemCategory::optimizer_state]);
  }
  fmt::print("memory: {}\n{}\n", e.memory_formula, plan::job_left_out_text());
  return 0;
}

int plan_calibrate_mpi_inner(const Args& args) {
#if SHARDLAB_HAVE_MPI
  MpiSession session(nullptr, nullptr);
  CommOptions copts;
  copts.timeout = std::chrono::seconds(60);
  auto world = make_mpi_world(copts);
  const double wall = paired_meetings_seconds(*world);
  if (world->rank() == 0) write_file_atomic(args.get("--out"), fmt::format("{}\n", wall));
  return 0;
#else
  (void)args;
  SL_THROW(InvalidArgument, "plan --calibrate-mpi-inner: this shardlab was built without MPI");
#endif
}

}  // namespace shardlab::cli
