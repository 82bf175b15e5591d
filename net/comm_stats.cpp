#include "net/comm_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <variant>

namespace shardlab::net {

namespace {

size_t slot_of(int64_t step) {
  return static_cast<size_t>(step % CommStats::kWindowSteps);
}

}  // namespace

CommStats::RankRing& CommStats::ring(int rank) {
  if (static_cast<size_t>(rank) >= per_rank_.size())
    per_rank_.resize(static_cast<size_t>(rank) + 1);
  return per_rank_[static_cast<size_t>(rank)];
}

void CommStats::add(const telemetry::Event& event) {
  if (event.rank < 0 || event.rank >= kMaxRanks) return;
  if (const auto* s = std::get_if<telemetry::StepEvent>(&event.payload)) {
    // A step number from the wire may be anything; clamping keeps step + 1 from overflowing and
    // the current step 1-based.
    ring(event.rank).current_step =
        std::clamp<int64_t>(s->step, 0, std::numeric_limits<int64_t>::max() - 1) + 1;
    return;
  }
  const auto* c = std::get_if<telemetry::CollectiveEvent>(&event.payload);
  if (c == nullptr) return;

  const double seconds = std::isfinite(c->duration) ? std::max(0.0, c->duration) : 0.0;
  const double busbw = std::isfinite(c->busbw) ? c->busbw : 0.0;
  CommAggregate& a = by_key_[CommKey{c->op, c->group}];
  ++a.count;
  if (!c->ok) ++a.failed;
  a.bytes += c->bytes;
  a.seconds += seconds;
  a.max_seconds = std::max(a.max_seconds, seconds);
  a.busbw_seconds += busbw * seconds;

  RankRing& r = ring(event.rank);
  if (r.seconds.empty()) {
    r.seconds.assign(kWindowSteps, 0.0f);
    r.step_of.assign(kWindowSteps, 0);
  }
  const int64_t step = r.current_step;
  const size_t slot = slot_of(step);
  if (r.step_of[slot] < step) {
    r.step_of[slot] = step;
    r.seconds[slot] = 0.0f;
  }
  // A slot already holding a newer step means this one left the window: nothing to record.
  if (r.step_of[slot] == step) r.seconds[slot] += static_cast<float>(seconds);
  last_step_ = std::max(last_step_, step);

  const double end = c->start + seconds;
  if (std::isfinite(end) && (!any_collective_ || end > last_end_)) {
    any_collective_ = true;
    last_end_ = end;
    last_group_ = c->group;
  }
}

void CommAggregate::merge(const CommAggregate& other) {
  count += other.count;
  failed += other.failed;
  bytes += other.bytes;
  seconds += other.seconds;
  max_seconds = std::max(max_seconds, other.max_seconds);
  busbw_seconds += other.busbw_seconds;
}

std::map<std::string, CommAggregate> CommStats::by_group_kind() const {
  std::map<std::string, CommAggregate> out;
  for (const auto& [key, a] : by_key_) out[key.group.substr(0, key.group.find('['))].merge(a);
  return out;
}

double CommStats::step_seconds(int rank, int64_t step) const {
  if (rank < 0 || static_cast<size_t>(rank) >= per_rank_.size()) return 0.0;
  if (step < first_step() || step > last_step_ || step < 1) return 0.0;
  const RankRing& r = per_rank_[static_cast<size_t>(rank)];
  if (r.seconds.empty()) return 0.0;
  const size_t slot = slot_of(step);
  return r.step_of[slot] == step ? static_cast<double>(r.seconds[slot]) : 0.0;
}

int64_t CommStats::first_step() const {
  if (last_step_ == 0) return 0;
  return std::max<int64_t>(1, last_step_ - kWindowSteps + 1);
}

}  // namespace shardlab::net
