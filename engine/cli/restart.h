// `shardlab run JOB --max-restarts N`: run the job again from its last checkpoint when an attempt
// fails in a way another attempt may not (a rank killed, a peer lost, a wait timed out, a file
// that could not be written), at most N times, like torchrun's --max-restarts.
//
// Not restarted, because they would fail again identically: bad input (InvalidArgument, hence
// UsageError; FormatError: a malformed job, data set or checkpoint) and bugs (InternalError, any
// exception outside shardlab::Error), also when a worker under mpirun reports them through its
// exit status (engine/launch/mpirun.h kWorkerBadInputStatus). Restarted: TimeoutError, CommError,
// IoError and RanksFailed (mpirun exited non-zero otherwise: a worker died, was killed or lost a
// peer).
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace shardlab::cli {

// A complete checkpoint of train.checkpoint_dir: its step directory, step, and the time its
// manifest was written (which tells a checkpoint written by this run from one left by another).
struct CheckpointMark {
  std::string step_dir;
  int64_t step = -1;
  std::filesystem::file_time_type written{};
  bool operator==(const CheckpointMark&) const = default;
};

// The latest complete checkpoint in `dir` (find_checkpoint, read_manifest), or nullopt when there
// is none yet (no directory, no complete step). A malformed manifest throws (FormatError).
std::optional<CheckpointMark> latest_checkpoint(const std::string& dir);

// Whether `e` is worth another attempt (see the top of this file).
bool is_restartable(const std::exception& e);

// "run.slrec" for attempt 0, "run.restart-2.slrec" for attempt 2: one recording per attempt.
std::string attempt_record_path(const std::string& path, int attempt);

struct RestartOptions {
  int max_restarts = 0;        // 0: one attempt, errors pass through unchanged
  std::string checkpoint_dir;  // the job's train.checkpoint_dir (required when max_restarts > 0)
  std::string initial_resume;  // the user's --resume ("" none): where attempt 0 starts
  std::chrono::milliseconds backoff{1000};  // pause before each restart
};

// Runs attempt(number, resume_from) (number 0, 1, ...; resume_from "" for the beginning, else a
// step directory) until it returns, rethrowing at once an error that is not restartable and,
// after max_restarts restarts, the last error. Before each restart it prints one line to stderr:
//   shardlab: restart 1/3 from DIR/step-00000040 (step 40) after: <what failed>
// or "... from the beginning after: ..." / "... from DIR (--resume) after: ..." when this run has
// written no checkpoint yet. A checkpoint that was already there when the run started (another
// run's) is not used unless it is the user's --resume.
int run_with_restarts(
    const RestartOptions& options,
    const std::function<int(int attempt, const std::string& resume_from)>& attempt);

}  // namespace shardlab::cli
