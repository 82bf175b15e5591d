#include "net/timeline.h"

#include "engine/core/display_text.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <variant>

namespace shardlab::net {

namespace {

inline bool before(const Span& a, const Span& b) {
  return a.start < b.start || (a.start == b.start && a.end < b.end);
}

const std::deque<Span> kNoSpans;
const std::deque<StepMark> kNoSteps;

}  // namespace

const char* to_string(SpanKind kind) {
  switch (kind) {
    case SpanKind::forward:
      return "forward";
    case SpanKind::backward:
      return "backward";
    case SpanKind::optimizer:
      return "optimizer";
    case SpanKind::collective:
      return "collective";
  }
  return "?";
}

Timeline::Lane& Timeline::lane(int rank) {
  if (static_cast<size_t>(rank) >= lanes_.size()) lanes_.resize(static_cast<size_t>(rank) + 1);
  return lanes_[static_cast<size_t>(rank)];
}

uint32_t Timeline::label_of(const std::string& text) {
  auto it = label_index_.find(text);
  if (it != label_index_.end()) return it->second;
  // Bounded like CommStats' rows: past kMaxLabels every new label is "(other)".
  const std::string label =
      labels_.size() >= kMaxLabels ? std::string("(other)") : printable(text, 2 * kMaxLabelBytes);
  if (auto same = label_index_.find(label); same != label_index_.end()) return same->second;
  const auto index = static_cast<uint32_t>(labels_.size());
  labels_.push_back(label);
  label_index_.emplace(label, index);
  return index;
}

void Timeline::add(const telemetry::Event& event) {
  if (event.rank < 0 || event.rank >= kMaxRanks) return;
  Span span;
  if (const auto* p = std::get_if<telemetry::PhaseEvent>(&event.payload)) {
    switch (p->phase) {
      case telemetry::Phase::forward:
        span.kind = SpanKind::forward;
        break;
      case telemetry::Phase::backward:
        span.kind = SpanKind::backward;
        break;
      case telemetry::Phase::optimizer:
        span.kind = SpanKind::optimizer;
        break;
      default:
        return;  // a phase this build does not know
    }
    span.start = p->start;
    span.end = p->end;
    span.micro_batch = span.kind == SpanKind::optimizer ? -1 : p->micro_batch;
    span.virtual_stage = span.kind == SpanKind::optimizer ? -1 : p->stage;
  } else if (const auto* c = std::get_if<telemetry::CollectiveEvent>(&event.payload)) {
    span.kind = SpanKind::collective;
    span.start = c->start;
    span.end = c->start + c->duration;
    span.ok = c->ok;
    span.seq = c->seq;
    span.array = c->array;
    span.unit = c->unit;
    label_scratch_.assign(c->op);
    label_scratch_ += ' ';
    label_scratch_ += c->group;
    span.label = label_of(label_scratch_);
  } else if (const auto* s = std::get_if<telemetry::StepEvent>(&event.payload)) {
    if (!std::isfinite(event.time)) return;
    StepMark mark;
    mark.step = s->step;
    mark.end = event.time;
    mark.start =
        std::isfinite(s->step_seconds) ? event.time - std::max(0.0, s->step_seconds) : event.time;
    std::deque<StepMark>& steps = lane(event.rank).steps;
    // A rank reports its steps in order: the mark nearly always goes at the back.
    auto at = steps.end();
    while (at != steps.begin() && std::prev(at)->step >= mark.step) --at;
    if (at != steps.end() && at->step == mark.step)
      *at = mark;
    else
      steps.insert(at, mark);
    if (steps.size() > kMaxSteps) steps.pop_front();
    latest_step_end_ = any_step_ ? std::max(latest_step_end_, mark.end) : mark.end;
    newest_step_ = any_step_ ? std::max(newest_step_, mark.step) : mark.step;
    any_step_ = true;
    return;
  } else {
    return;
  }

  if (!std::isfinite(span.start) || !std::isfinite(span.end)) return;
  span.end = std::max(span.end, span.start);
  std::deque<Span>& spans = lane(event.rank).spans;
  // Spans arrive nearly in start order: look a few places back from the end first, and search
  // the rest only for a truly late one.
  constexpr ptrdiff_t kNearBack = 16;
  auto at = spans.end();
  const auto near =
      spans.size() > static_cast<size_t>(kNearBack) ? spans.end() - kNearBack : spans.begin();
  while (at != near && before(span, *std::prev(at))) --at;
  if (at == near && at != spans.begin() && before(span, *std::prev(at)))
    at = std::upper_bound(spans.begin(), near, span, before);
  spans.insert(at, span);
  if (spans.size() > kMaxSpans) spans.pop_front();
}

const std::deque<Span>& Timeline::spans(int rank) const {
  if (rank < 0 || static_cast<size_t>(rank) >= lanes_.size()) return kNoSpans;
  return lanes_[static_cast<size_t>(rank)].spans;
}

const std::deque<StepMark>& Timeline::steps(int rank) const {
  if (rank < 0 || static_cast<size_t>(rank) >= lanes_.size()) return kNoSteps;
  return lanes_[static_cast<size_t>(rank)].steps;
}

std::pair<double, double> Timeline::recent_window(int steps) const {
  if (!any_step_) return {0.0, 0.0};
  const int64_t first = newest_step_ - std::max(steps, 1) + 1;
  bool found = false;
  double start = 0;
  for (const Lane& l : lanes_) {
    for (auto it = l.steps.rbegin(); it != l.steps.rend() && it->step >= first; ++it) {
      start = found ? std::min(start, it->start) : it->start;
      found = true;
    }
  }
  return {start, latest_step_end_};
}

double Timeline::busy_seconds(int rank, double t0, double t1) const {
  if (!(t1 > t0)) return 0.0;
  double busy = 0;
  double run_start = 0, run_end = 0;
  bool open = false;
  for (const Span& s : spans(rank)) {
    if (s.start >= t1) break;  // sorted by start: nothing later can reach into the window
    const double a = std::max(s.start, t0), b = std::min(s.end, t1);
    if (b <= a) continue;
    if (open && a <= run_end) {
      run_end = std::max(run_end, b);
    } else {
      if (open) busy += run_end - run_start;
      run_start = a;
      run_end = b;
      open = true;
    }
  }
  if (open) busy += run_end - run_start;
  return busy;
}

}  // namespace shardlab::net
