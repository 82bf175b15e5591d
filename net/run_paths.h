// Where runs are recorded by default, one rule for `shardlab run` and the app: the folder is
// $SHARDLAB_RUNS_DIR when set and not empty, else "runs" (relative to the working directory), and
// a recording is named <YYYYmmdd-HHMMSS>-<job name>-<pid>.slrec, the job name with every character
// other than ASCII letters, digits, '-' and '_' replaced by '_'.
#pragma once

#include <string>

namespace shardlab::net {

// $SHARDLAB_RUNS_DIR, or "runs".
std::string runs_dir();

// The job name with every character other than ASCII letters, digits, '-' and '_' replaced by '_'
// ("job" when empty): safe in a file name.
std::string safe_job_name(const std::string& job_name);

// "<local time YYYYmmdd-HHMMSS>-<safe_job_name>-<this process's pid>",
// without a folder or extension.
std::string recording_base_name(const std::string& job_name);

}  // namespace shardlab::net
