#include "engine/launch/workers.h"

#include <unistd.h>

#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "net/run_paths.h"

namespace shardlab::launch {

namespace fs = std::filesystem;

std::vector<std::string> worker_argv(const WorkerCommand& c) {
  std::vector<std::string> argv{c.program, "worker", c.job_file};
  for (const std::string& s : c.sets) {
    argv.push_back("--set");
    argv.push_back(s);
  }
  if (c.quiet) argv.push_back("--quiet");
  for (const auto& [flag, value] :
       {std::pair<const char*, const std::string&>{"--resume", c.resume},
        {"--telemetry", c.telemetry},
        {"--token-file", c.token_file},
        {"--save-model", c.save_model}})
    if (!value.empty()) {
      argv.push_back(flag);
      argv.push_back(value);
    }
  if (c.verify) argv.push_back("--verify");
  return argv;
}

std::vector<std::string> srun_argv(const WorkerCommand& command, int ranks) {
  SL_ENFORCE(ranks >= 1, "srun needs at least one task, got {}", ranks);
  std::vector<std::string> argv{"srun", "--mpi=pmix", "-n", std::to_string(ranks)};
  for (std::string& word : worker_argv(command)) argv.push_back(std::move(word));
  return argv;
}

std::string shell_quote(const std::string& word) {
  static const std::string plain = "@%+=:,./-_";
  bool ok = !word.empty();
  for (char ch : word) {
    const auto u = static_cast<unsigned char>(ch);
    if (!(u < 128 && (std::isalnum(u) || plain.find(ch) != std::string::npos))) ok = false;
  }
  if (ok) return word;
  std::string quoted = "'";
  for (char ch : word) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return quoted + "'";
}

std::string shell_line(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& word : argv) {
    if (!line.empty()) line += ' ';
    line += shell_quote(word);
  }
  return line;
}

std::string remote_command(const WorkerCommand& c, int world, bool srun) {
  if (srun) return shell_line(srun_argv(c, world));
  return fmt::format("mpirun -np {} {}", world, shell_line(worker_argv(c)));
}

std::string advertise_host(const std::string& listen_host, const std::string& given) {
  std::string host = given;
  if (host.empty()) {
    if (listen_host.empty() || listen_host == "0.0.0.0" || listen_host == "::" ||
        listen_host == "*") {
      char name[256] = {0};
      host = gethostname(name, sizeof name - 1) == 0 ? name : "localhost";
    } else {
      host = listen_host;
    }
  }
  if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
  return host;
}

std::string default_recording_path(const JobSpec& job) {
  return fmt::format("{}/{}.slrec", net::runs_dir(), net::recording_base_name(job.name));
}

std::string unused_path(const std::string& base, const std::string& suffix) {
  std::string path = base + suffix;
  for (int i = 2; fs::exists(path); ++i) path = fmt::format("{}-{}{}", base, i, suffix);
  return path;
}

std::string absolute_path_in_new_dir(const std::string& path) {
  const fs::path p = fs::absolute(path).lexically_normal();
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  SL_ENFORCE_T(IoError, fs::is_directory(p.parent_path()), "cannot create the folder {}",
               p.parent_path().string());
  return p.string();
}

namespace {
std::string runs_folder() {
  return fs::absolute(net::runs_dir()).lexically_normal().string();
}
}  // namespace

std::string app_recording_path(const JobSpec& job) {
  return unused_path(runs_folder() + "/" + net::recording_base_name(job.name), ".slrec");
}

std::string app_job_file(const JobSpec& job) {
  char stamp[32] = {0};
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  return unused_path(fmt::format("{}/{}-{}", runs_folder(), net::safe_job_name(job.name), stamp),
                     ".json");
}

std::string app_token_file(const JobSpec& job) {
  return fmt::format("{}/{}.token", runs_folder(), net::safe_job_name(job.name));
}

void write_worker_job(const JobSpec& job, const std::string& path) {
  JobSpec for_workers = job;
  for_workers.telemetry = TelemetryConfig{};
  save_job(for_workers, path);
}

}  // namespace shardlab::launch
