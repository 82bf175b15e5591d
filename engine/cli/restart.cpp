#include "engine/cli/restart.h"

#include <fmt/format.h>

#include <cstdio>
#include <thread>

#include "engine/checkpoint/checkpoint_store.h"
#include "engine/comm/communicator.h"
#include "engine/core/error.h"
#include "engine/launch/mpirun.h"

namespace shardlab::cli {

namespace fs = std::filesystem;

std::optional<CheckpointMark> latest_checkpoint(const std::string& dir) {
  CheckpointMark mark;
  try {
    mark.step_dir = find_checkpoint(dir);
  } catch (const IoError&) {
    return std::nullopt;  // no directory yet, or no complete step in it
  }
  mark.step = read_manifest(mark.step_dir).step;
  std::error_code ec;
  mark.written = fs::last_write_time(fs::path(mark.step_dir) / "manifest.json", ec);
  if (ec) mark.written = fs::last_write_time(mark.step_dir, ec);
  return mark;
}

bool is_restartable(const std::exception& e) {
  // Bad input and bugs first: UsageError derives from InvalidArgument.
  if (dynamic_cast<const InvalidArgument*>(&e) || dynamic_cast<const FormatError*>(&e) ||
      dynamic_cast<const InternalError*>(&e))
    return false;
  return dynamic_cast<const TimeoutError*>(&e) || dynamic_cast<const CommError*>(&e) ||
         dynamic_cast<const IoError*>(&e) || dynamic_cast<const launch::RanksFailed*>(&e);
}

std::string attempt_record_path(const std::string& path, int attempt) {
  if (attempt == 0 || path.empty()) return path;
  const fs::path p(path);
  fs::path name = p.stem();
  name += fmt::format(".restart-{}", attempt);
  name += p.extension();
  return (p.parent_path() / name).string();
}

int run_with_restarts(
    const RestartOptions& options,
    const std::function<int(int attempt, const std::string& resume_from)>& attempt) {
  SL_ENFORCE_T(InternalError, options.max_restarts == 0 || !options.checkpoint_dir.empty(),
               "run_with_restarts: restarts need a checkpoint directory");
  // What is there before this run writes anything: another run's checkpoint, not ours.
  const std::optional<CheckpointMark> at_start =
      options.max_restarts > 0 ? latest_checkpoint(options.checkpoint_dir) : std::nullopt;
  std::string resume_from = options.initial_resume;
  for (int n = 0;; ++n) {
    try {
      return attempt(n, resume_from);
    } catch (const std::exception& e) {
      if (n >= options.max_restarts || !is_restartable(e)) {
        if (n > 0 && is_restartable(e)) {
          std::fflush(stdout);
          fmt::print(stderr, "shardlab: giving up after {} restart{} (--max-restarts {})\n", n,
                     n == 1 ? "" : "s", options.max_restarts);
        }
        throw;
      }
      const std::optional<CheckpointMark> mark = latest_checkpoint(options.checkpoint_dir);
      std::string from;
      if (mark && mark != at_start) {
        resume_from = mark->step_dir;
        from = fmt::format("{} (step {})", mark->step_dir, mark->step);
      } else if (!options.initial_resume.empty()) {
        resume_from = options.initial_resume;
        from = fmt::format("{} (--resume; no checkpoint of this run yet)", resume_from);
      } else {
        resume_from.clear();
        from = "the beginning (no checkpoint of this run yet)";
      }
      std::fflush(stdout);
      fmt::print(stderr, "shardlab: restart {}/{} from {} after: {}\n", n + 1, options.max_restarts,
                 from, e.what());
      std::fflush(stderr);
      std::this_thread::sleep_for(options.backoff);
    }
  }
}

}  // namespace shardlab::cli
