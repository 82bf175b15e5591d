#include "engine/doctor/check.h"

#include <cmath>
#include <exception>
#include <utility>

namespace shardlab::doctor {

const char* status_name(CheckStatus s) {
  switch (s) {
    case CheckStatus::kPass:
      return "pass";
    case CheckStatus::kFail:
      return "FAIL";
    case CheckStatus::kSkip:
      return "skip";
  }
  return "?";
}

CheckResult bounded(std::string group, std::string name, std::string metric, double figure,
                    double bound, std::string detail) {
  CheckResult r;
  r.group = std::move(group);
  r.name = std::move(name);
  r.metric = std::move(metric);
  r.figure = figure;
  r.bound = bound;
  r.status = std::isfinite(figure) && figure <= bound ? CheckStatus::kPass : CheckStatus::kFail;
  r.detail = std::move(detail);
  return r;
}

CheckResult skipped(std::string group, std::string name, std::string why) {
  CheckResult r;
  r.group = std::move(group);
  r.name = std::move(name);
  r.status = CheckStatus::kSkip;
  r.detail = std::move(why);
  return r;
}

CheckResult failed(std::string group, std::string name, std::string why) {
  CheckResult r;
  r.group = std::move(group);
  r.name = std::move(name);
  r.status = CheckStatus::kFail;
  r.detail = std::move(why);
  return r;
}

void guarded(CheckList& out, const std::string& group, const std::string& name,
             const std::function<void(CheckList&)>& body) {
  try {
    body(out);
  } catch (const std::exception& e) {
    out.push_back(failed(group, name, e.what()));
  }
}

bool all_passed(const CheckList& checks) {
  return count(checks, CheckStatus::kFail) == 0;
}

int count(const CheckList& checks, CheckStatus s) {
  int n = 0;
  for (const CheckResult& c : checks) n += c.status == s ? 1 : 0;
  return n;
}

}  // namespace shardlab::doctor
