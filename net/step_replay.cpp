#include "net/step_replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

namespace shardlab::net {

namespace tel = telemetry;
using Ranges = std::vector<tel::LayoutRange>;

const char* to_string(ReplayLane lane) {
  switch (lane) {
    case ReplayLane::params:
      return "params";
    case ReplayLane::grads:
      return "grads";
    default:
      return "optimizer_state";
  }
}

const char* to_string(ReplayRole role) {
  switch (role) {
    case ReplayRole::read:
      return "read";
    case ReplayRole::write:
      return "write";
    case ReplayRole::send:
      return "send";
    default:
      return "receive";
  }
}

const char* to_string(ReplayKind kind) {
  switch (kind) {
    case ReplayKind::forward:
      return "forward";
    case ReplayKind::backward:
      return "backward";
    case ReplayKind::collective:
      return "collective";
    default:
      return "update";
  }
}

namespace {

// Sorted and merged where they touch or overlap.
Ranges merged(Ranges r) {
  std::sort(r.begin(), r.end(),
            [](const tel::LayoutRange& a, const tel::LayoutRange& b) { return a.begin < b.begin; });
  Ranges out;
  for (const tel::LayoutRange& x : r) {
    if (x.end <= x.begin) continue;
    if (!out.empty() && x.begin <= out.back().end)
      out.back().end = std::max(out.back().end, x.end);
    else
      out.push_back(x);
  }
  return out;
}

// The elements in both (each sorted and disjoint).
Ranges intersection(const Ranges& a, const Ranges& b) {
  Ranges out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t lo = std::max(a[i].begin, b[j].begin), hi = std::min(a[i].end, b[j].end);
    if (lo < hi) out.push_back({lo, hi});
    (a[i].end < b[j].end) ? ++i : ++j;
  }
  return out;
}

// What a rank computes with: all of its units (FSDP gathers each block whole), else what it holds.
Ranges compute_ranges(const tel::LayoutEvent& l) {
  if (l.units.empty()) return l.params;
  Ranges all;
  for (const Ranges& u : l.units) all.insert(all.end(), u.begin(), u.end());
  return merged(std::move(all));
}

const char* unit_word(const std::string& strategy) {
  return strategy == "fsdp" ? "block" : "bucket";
}

// Where a frame's spans are gathered while the replay is built.
struct Key {
  int kind = 0;  // ReplayKind, or 10 + rank for an unlabelled p2p op (never grouped)
  int a = -1, b = -1;
  uint32_t label = 0;
  uint64_t seq = 0;
  auto tie() const { return std::tie(kind, a, b, label, seq); }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

std::vector<ReplayTouch> touches_of(const ReplayFrame& f, const tel::LayoutEvent* l) {
  if (!l) return {};
  std::vector<ReplayTouch> t;
  auto add = [&](ReplayLane lane, ReplayRole role, Ranges ranges) {
    if (!ranges.empty()) t.push_back({lane, role, std::move(ranges)});
  };
  switch (f.kind) {
    case ReplayKind::forward:
      add(ReplayLane::params, ReplayRole::read, compute_ranges(*l));
      break;
    case ReplayKind::backward:
      add(ReplayLane::params, ReplayRole::read, compute_ranges(*l));
      add(ReplayLane::grads, ReplayRole::write, compute_ranges(*l));
      break;
    case ReplayKind::update:
      add(ReplayLane::grads, ReplayRole::read, l->optimizer_state);
      add(ReplayLane::params, ReplayRole::write, l->optimizer_state);
      add(ReplayLane::optimizer_state, ReplayRole::write, l->optimizer_state);
      break;
    case ReplayKind::collective: {
      if (f.unit < 0 || f.unit >= static_cast<int>(l->units.size())) break;
      const Ranges& unit = l->units[static_cast<size_t>(f.unit)];
      const Ranges own = intersection(unit, l->optimizer_state);
      if (f.array == tel::CollectiveArray::grads && f.op == "reduce_scatter") {
        add(ReplayLane::grads, ReplayRole::send, unit);
        add(ReplayLane::grads, ReplayRole::receive, own);
      } else if (f.array == tel::CollectiveArray::grads && f.op == "all_reduce") {
        add(ReplayLane::grads, ReplayRole::send, unit);
        add(ReplayLane::grads, ReplayRole::receive, unit);
      } else if (f.array == tel::CollectiveArray::params && f.op == "all_gather") {
        add(ReplayLane::params, ReplayRole::send, own);
        add(ReplayLane::params, ReplayRole::receive, unit);
      }
      break;
    }
  }
  return t;
}

void describe(ReplayFrame& f, const std::string& strategy) {
  const int n = static_cast<int>(f.ranks.size());
  switch (f.kind) {
    case ReplayKind::forward:
    case ReplayKind::backward: {
      const char* what = f.kind == ReplayKind::forward ? "forward" : "backward";
      f.title = fmt::format("{}, micro-batch {}, stage {}", what, f.micro_batch, f.stage);
      if (f.kind == ReplayKind::forward)
        f.explain = strategy == "fsdp"
                        ? "Each rank computes forward with the whole model: every block is "
                          "gathered from the shards just for this, and let go after."
                        : "Each rank computes forward with the parameters it holds.";
      else
        f.explain = strategy == "fsdp"
                        ? "Each rank computes backward block by block (each gathered again) and "
                          "writes the gradients of the whole block before they are reduced."
                        : "Each rank computes backward and writes the gradients of everything it "
                          "computed, whole, before they are reduced.";
      break;
    }
    case ReplayKind::update:
      f.title = "update";
      f.explain = strategy == "ddp" || strategy.empty()
                      ? "Every rank runs the same optimizer step on everything it holds."
                      : "Each rank runs the optimizer on the slice it owns only: its parameters "
                        "and optimizer state there.";
      break;
    case ReplayKind::collective: {
      if (f.array == tel::CollectiveArray::unknown) {
        f.title = fmt::format("{} on {}", f.op, f.group);
        f.explain = "Moves no model state (activations, the loss or a norm).";
        break;
      }
      const char* word = unit_word(strategy);
      f.title = fmt::format("{} of {}, {} {} on {}", f.op, tel::to_string(f.array), word, f.unit,
                            f.group);
      if (f.op == "reduce_scatter")
        f.explain = fmt::format(
            "Each of the {} ranks sends its partial gradient sums of {} {} and gets back the "
            "average of its own slice only.",
            n, word, f.unit);
      else if (f.op == "all_reduce")
        f.explain = fmt::format(
            "Each of the {} ranks sends its gradients of {} {} and gets back the average of the "
            "whole {}.",
            n, word, f.unit, word);
      else if (f.op == "all_gather")
        f.explain = fmt::format(
            "Each of the {} ranks sends its own slice of {} {}'s parameters and receives "
            "everyone's: the whole {}{}.",
            n, word, f.unit, word, strategy == "fsdp" ? ", for the time it computes" : " again");
      else
        f.explain = fmt::format("Moves the {} of {} {}.", tel::to_string(f.array), word, f.unit);
      break;
    }
  }
}

// The step's window on one rank: after the previous step's end, up to this one's end.
struct Window {
  double from = 0, to = 0;
  bool open_start = false;  // no previous mark: from is this step's own start
};

std::optional<Window> window_of(const Timeline& tl, int rank, int64_t step) {
  const auto& marks = tl.steps(rank);  // sorted by step
  const auto at = std::lower_bound(marks.begin(), marks.end(), step,
                                   [](const StepMark& m, int64_t s) { return m.step < s; });
  if (at == marks.end() || at->step != step) return std::nullopt;
  if (at != marks.begin() && std::prev(at)->step == step - 1)
    return Window{std::prev(at)->end, at->end, false};
  return Window{at->start, at->end, true};
}

// Every rank has the step's mark, and its spans reach back to the window's start.
bool replayable(const Timeline& tl, int world, int64_t step) {
  for (int r = 0; r < world; ++r) {
    const auto w = window_of(tl, r, step);
    const auto& spans = tl.spans(r);
    if (!w || spans.empty() || spans.front().start > w->from) return false;
  }
  return true;
}

}  // namespace

std::vector<int64_t> replayable_steps(const RunModel& model) {
  // Per rank, the oldest step whose window its spans still reach and its newest mark: the steps
  // of rank 0 between the latest of the first and the earliest of the second (O(world log)).
  const Timeline& tl = model.timeline();
  const int world = model.world();
  if (world == 0) return {};
  int64_t first = std::numeric_limits<int64_t>::min(), last = std::numeric_limits<int64_t>::max();
  for (int r = 0; r < world; ++r) {
    const auto& marks = tl.steps(r);
    const auto& spans = tl.spans(r);
    if (marks.empty() || spans.empty()) return {};
    const double oldest = spans.front().start;
    // The first mark whose window starts at or after the oldest span (a window starts at the
    // previous mark's end, or its own start).
    size_t lo = 0, hi = marks.size();
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      const double from = mid > 0 && marks[mid - 1].step == marks[mid].step - 1 ? marks[mid - 1].end
                                                                                : marks[mid].start;
      if (from >= oldest)
        hi = mid;
      else
        lo = mid + 1;
    }
    if (lo == marks.size()) return {};
    first = std::max(first, marks[lo].step);
    last = std::min(last, marks.back().step);
  }
  std::vector<int64_t> out;
  for (const StepMark& m : tl.steps(0))
    if (m.step >= first && m.step <= last) out.push_back(m.step);
  return out;
}

StepReplay replay_step(const RunModel& model, int64_t step) {
  const StepReplay* newest = model.newest_replay();
  if (newest && (step <= 0 || step == newest->step)) {
    StepReplay out = *newest;
    // The steps the timeline can replay now, and the newest.
    out.steps = replayable_steps(model);
    if (!std::binary_search(out.steps.begin(), out.steps.end(), newest->step)) {
      out.steps.push_back(newest->step);
      std::sort(out.steps.begin(), out.steps.end());
    }
    return out;
  }
  return replay_from_timeline(model, step);
}

StepReplay replay_from_timeline(const RunModel& model, int64_t step) {
  StepReplay out;
  for (const auto& [rank, r] : model.ranks())
    if (r.layout && out.strategy.empty()) out.strategy = r.layout->strategy;
  const Timeline& tl = model.timeline();
  const int world = model.world();
  if (world == 0) {
    out.note = "no rank has reported yet";
    return out;
  }
  if (step <= 0 || !replayable(tl, world, step)) {
    out.steps = replayable_steps(model);
    if (out.steps.empty()) {
      out.note = tl.steps(0).empty() ? "no step has completed yet"
                                     : "no step completed by every rank is still in the timeline";
      return out;
    }
    if (step <= 0) {
      step = out.steps.back();
    } else {
      out.note = fmt::format("step {} cannot be replayed (steps {} to {} can)", step,
                             out.steps.front(), out.steps.back());
      return out;
    }
  }
  out.step = step;

  std::map<Key, ReplayFrame> frames;
  // Unlabelled communication that ran inside (or right after) a rank's forward or backward: the
  // frame that takes its count, per rank and kind of frame.
  for (int r = 0; r < world; ++r) {
    const Window w = *window_of(tl, r, step);
    const auto& all = tl.spans(r);  // sorted by start: from the first in the window on
    const auto from = std::lower_bound(all.begin(), all.end(), w.from,
                                       [](const Span& s, double t) { return s.start < t; });

    std::vector<std::pair<double, Key>> phases;  // this rank's phase spans: end, frame
    int before_phases = 0;  // tp/pp communication before the rank's first phase of the step
    for (auto it = from; it != all.end() && it->start <= w.to; ++it) {
      const Span& s = *it;
      if (!w.open_start && s.start <= w.from) continue;
      Key key;
      ReplayFrame proto;
      switch (s.kind) {
        case SpanKind::forward:
        case SpanKind::backward:
          proto.kind = s.kind == SpanKind::forward ? ReplayKind::forward : ReplayKind::backward;
          proto.stage = s.virtual_stage;
          proto.micro_batch = s.micro_batch;
          key = {static_cast<int>(proto.kind), s.virtual_stage, s.micro_batch, 0, 0};
          break;
        case SpanKind::optimizer:
          proto.kind = ReplayKind::update;
          key = {static_cast<int>(proto.kind), -1, -1, 0, 0};
          break;
        case SpanKind::collective: {
          const std::string& label = tl.labels()[s.label];
          const size_t space = label.find(' ');
          proto.kind = ReplayKind::collective;
          proto.op = label.substr(0, space);
          proto.group = space == std::string::npos ? std::string() : label.substr(space + 1);
          proto.array = s.array;
          proto.unit = s.unit;
          const bool p2p = proto.op == "send" || proto.op == "recv";
          // Tensor parallelism's activations and the pipeline's sends belong to the forward or
          // backward they serve: counted in this rank's latest one (the same on every rank of
          // the group, however the spans' ends fall).
          const bool model_parallel =
              proto.group.starts_with("tp[") || proto.group.starts_with("pp[") || p2p;
          if (s.array == tel::CollectiveArray::unknown && model_parallel) {
            if (phases.empty())
              ++before_phases;  // counted in the first one
            else
              frames[phases.back().second].inside += 1;
            continue;
          }
          key = {static_cast<int>(ReplayKind::collective), 0, 0, s.label, s.seq};
          if (p2p) key.kind = 10 + r;
          break;
        }
      }
      ReplayFrame& f = frames.try_emplace(key, proto).first->second;
      if (f.ranks.empty() || s.start < f.start) f.start = s.start;
      f.end = std::max(f.end, s.end);
      ReplayRank rr;
      rr.rank = r;
      rr.start = s.start;
      rr.end = s.end;
      f.ranks.push_back(std::move(rr));
      if (s.kind == SpanKind::forward || s.kind == SpanKind::backward) {
        phases.emplace_back(s.end, key);
        f.inside += std::exchange(before_phases, 0);
      }
    }
  }
  for (auto& [key, f] : frames) {
    std::sort(f.ranks.begin(), f.ranks.end(),
              [](const ReplayRank& a, const ReplayRank& b) { return a.rank < b.rank; });
    for (ReplayRank& rr : f.ranks) {
      const auto it = model.ranks().find(rr.rank);
      const tel::LayoutEvent* l =
          it != model.ranks().end() && it->second.layout ? &*it->second.layout : nullptr;
      rr.touches = touches_of(f, l);
    }
    describe(f, out.strategy);
    out.frames.push_back(std::move(f));
  }
  std::stable_sort(out.frames.begin(), out.frames.end(),
                   [](const ReplayFrame& a, const ReplayFrame& b) { return a.start < b.start; });
  bool any_layout = false;
  for (const auto& [rank, r] : model.ranks()) any_layout |= r.layout.has_value();
  if (!any_layout) out.note = "the layout is unknown: the frames touch nothing";
  return out;
}

}  // namespace shardlab::net
