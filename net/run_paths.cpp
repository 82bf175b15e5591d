#include "net/run_paths.h"

#include <unistd.h>

#include <cstdlib>
#include <ctime>

#include <fmt/format.h>

namespace shardlab::net {

std::string runs_dir() {
  const char* dir = std::getenv("SHARDLAB_RUNS_DIR");
  return dir && *dir ? dir : "runs";
}

std::string safe_job_name(const std::string& job_name) {
  std::string name = job_name.empty() ? "job" : job_name;
  for (char& ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    const bool keep = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      c == '-' || c == '_';
    if (!keep) ch = '_';
  }
  return name;
}

std::string recording_base_name(const std::string& job_name) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return fmt::format("{}-{}-{}", stamp, safe_job_name(job_name), static_cast<long>(getpid()));
}

}  // namespace shardlab::net
