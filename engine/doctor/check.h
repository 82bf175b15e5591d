// One check of `shardlab doctor` and of the Qt suites that call the same functions: what was
// measured, against which bound, and whether it held. A check passes when its figure is finite
// and at most its bound; a check that could not run on this node is skipped with the reason
// (never counted as a pass); a check whose code threw fails with the exception's message.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace shardlab::doctor {

enum class CheckStatus { kPass, kFail, kSkip };

const char* status_name(CheckStatus s);  // "pass", "FAIL", "skip"

struct CheckResult {
  std::string group;   // "kernels", "model", "training", "memory", "nccl"
  std::string name;    // what was checked, e.g. "adam_update fp32 n=1000003"
  std::string metric;  // what the figure is, e.g. "max rel err"; "" for a skip
  double figure = 0;   // the measured value
  double bound = 0;    // the largest figure that passes
  CheckStatus status = CheckStatus::kSkip;
  std::string detail;  // why it failed or was skipped, or a note on the bound
};

using CheckList = std::vector<CheckResult>;

// figure <= bound (and finite) passes; `detail` says where the bound comes from or what failed.
CheckResult bounded(std::string group, std::string name, std::string metric, double figure,
                    double bound, std::string detail = {});
CheckResult skipped(std::string group, std::string name, std::string why);
CheckResult failed(std::string group, std::string name, std::string why);

// Runs `body`, which appends its results to `out`; when it throws, appends one failed check
// named `name` with the exception's message instead (the results it appended before stay).
void guarded(CheckList& out, const std::string& group, const std::string& name,
             const std::function<void(CheckList&)>& body);

// Why CUDA device `device` cannot be checked on this node, or "": this build has no CUDA kernels,
// no GPU is usable, there is no such device, or its architecture is older than the kernels'.
// The doctor's one wording for every group's skip ("no usable GPU: ..." or "this shardlab was
// built without the CUDA kernels ...").
std::string gpu_skip_reason(int device);

bool all_passed(const CheckList& checks);  // no kFail (skips do not fail a node)
int count(const CheckList& checks, CheckStatus s);

}  // namespace shardlab::doctor
