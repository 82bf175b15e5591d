#include "net/comm_stats.h"

#include "engine/core/display_text.h"

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

// Seconds from the wire: negative or non-finite figures (clock trouble, corruption) count as none.
double seconds_or_zero(double x) {
  return std::isfinite(x) ? std::max(0.0, x) : 0.0;
}

void add_to(std::array<float, kStepMetrics>& cell, StepMetric metric, double seconds) {
  cell[static_cast<size_t>(metric)] += static_cast<float>(seconds);
}

}  // namespace

const char* to_string(StepMetric metric) {
  switch (metric) {
    case StepMetric::comm:
      return "communication";
    case StepMetric::wait:
      return "wait";
    case StepMetric::transfer:
      return "transfer";
    case StepMetric::compute:
      return "compute";
  }
  return "?";
}

CommStats::RankRing& CommStats::ring(int rank) {
  if (static_cast<size_t>(rank) >= per_rank_.size())
    per_rank_.resize(static_cast<size_t>(rank) + 1);
  return per_rank_[static_cast<size_t>(rank)];
}

CommStats::Slot* CommStats::current_slot(int rank) {
  RankRing& r = ring(rank);
  if (r.cells.empty()) r.cells.assign(kWindowSteps, Slot{});
  const int64_t step = r.current_step;
  Slot& slot = r.cells[slot_of(step)];
  if (slot.step < step) slot = Slot{step, {}};
  last_step_ = std::max(last_step_, step);
  // A slot already holding a newer step means this one left the window: nothing to record.
  return slot.step == step ? &slot : nullptr;
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
  if (const auto* p = std::get_if<telemetry::PhaseEvent>(&event.payload)) {
    if (Slot* slot = current_slot(event.rank))
      add_to(slot->seconds, StepMetric::compute, seconds_or_zero(p->end - p->start));
    return;
  }
  const auto* c = std::get_if<telemetry::CollectiveEvent>(&event.payload);
  if (c == nullptr) return;

  const double seconds = seconds_or_zero(c->duration);
  const double busbw = std::isfinite(c->busbw) ? c->busbw : 0.0;
  auto it = by_key_.find(CommKey{c->op, c->group});
  if (it == by_key_.end()) {
    // A new (op, group): printable and short, and past kMaxKeys lumped into one row, so a peer
    // inventing names cannot grow the table without bound.
    const CommKey key = by_key_.size() >= kMaxKeys ? CommKey{"(other)", "(other)"}
                                                   : CommKey{printable(c->op, kMaxLabelBytes),
                                                             printable(c->group, kMaxLabelBytes)};
    it = by_key_.try_emplace(key).first;
  }
  CommAggregate& a = it->second;
  ++a.count;
  if (!c->ok) ++a.failed;
  a.bytes += c->bytes;
  a.seconds += seconds;
  a.max_seconds = std::max(a.max_seconds, seconds);
  a.busbw_seconds += busbw * seconds;

  if (Slot* slot = current_slot(event.rank)) {
    add_to(slot->seconds, StepMetric::comm, seconds);
    // A negative or NaN wait is unknown: comm only (see the header).
    if (c->wait >= 0) {
      const double wait = std::min(seconds_or_zero(c->wait), seconds);
      add_to(slot->seconds, StepMetric::wait, wait);
      add_to(slot->seconds, StepMetric::transfer, seconds - wait);
    }
  }
  if (c->wait >= 0) waits_known_ = true;

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

double CommStats::step_seconds(int rank, int64_t step, StepMetric metric) const {
  if (rank < 0 || static_cast<size_t>(rank) >= per_rank_.size()) return 0.0;
  if (step < first_step() || step > last_step_ || step < 1) return 0.0;
  const auto m = static_cast<size_t>(metric);
  if (m >= kStepMetrics) return 0.0;
  const RankRing& r = per_rank_[static_cast<size_t>(rank)];
  if (r.cells.empty()) return 0.0;
  const Slot& slot = r.cells[slot_of(step)];
  return slot.step == step ? static_cast<double>(slot.seconds[m]) : 0.0;
}

int64_t CommStats::first_step() const {
  if (last_step_ == 0) return 0;
  return std::max<int64_t>(1, last_step_ - kWindowSteps + 1);
}

}  // namespace shardlab::net
