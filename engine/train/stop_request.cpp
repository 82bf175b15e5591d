#include "engine/train/stop_request.h"

#include <algorithm>

namespace shardlab {

bool StopRequest::should_stop(int64_t steps_done) {
  std::lock_guard<std::mutex> lock(mu_);
  if (steps_done >= stop_at_) return true;
  // This rank goes on with step steps_done + 1: a later request may not stop before it.
  max_started_ = std::max(max_started_, steps_done + 1);
  return false;
}

void StopRequest::request() {
  std::lock_guard<std::mutex> lock(mu_);
  stop_at_ = std::min(stop_at_, max_started_);
}

bool StopRequest::requested() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_at_ != std::numeric_limits<int64_t>::max();
}

int64_t StopRequest::stop_at() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_at_;
}

}  // namespace shardlab
