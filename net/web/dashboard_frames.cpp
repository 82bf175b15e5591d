#include "net/web/dashboard_frames.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <limits>

#include "engine/core/json_text.h"
#include "engine/core/memory.h"
#include "net/web/layout_json.h"
#include "net/web/step_json.h"

namespace shardlab::net {

namespace {

using Out = std::back_insert_iterator<std::string>;

const char* state_word(telemetry::JobState s) {
  switch (s) {
    case telemetry::JobState::starting:
      return "starting";
    case telemetry::JobState::running:
      return "running";
    case telemetry::JobState::finished:
      return "finished";
    case telemetry::JobState::failed:
      return "failed";
  }
  return "starting";
}

void put_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  fmt::format_to(Out(out), "{:.6g}", v);
}

// An epoch time to the millisecond ({:.6g} would round it to 10^4 s).
void put_time(std::string& out, double t) {
  if (!std::isfinite(t)) {
    out += "null";
    return;
  }
  fmt::format_to(Out(out), "{:.3f}", t);
}

// A JSON string literal (engine/core/json_text.h: invalid UTF-8 becomes U+FFFD, so a frame is
// always a valid WebSocket text message).
void put_string(std::string& out, const std::string& text) {
  append_json_string(out, text);
}

struct Sizes {
  int world = 0, pp = 1, tp = 1, dp = 1;
  std::string job_id;
};

Sizes sizes_of(const RunModel& model) {
  Sizes s;
  for (const auto& [rank, r] : model.ranks()) {
    s.world = std::max(s.world, rank + 1);
    if (!r.hello) continue;
    s.world = std::max(s.world, r.hello->world);
    s.pp = r.hello->pp;
    s.tp = r.hello->tp;
    s.dp = r.hello->dp;
    if (s.job_id.empty()) s.job_id = r.hello->job_id;
  }
  // A corrupt HELLO must not make the page allocate millions of cells.
  s.world = std::min(s.world, CommStats::kMaxRanks);
  return s;
}

std::string job_section(const FrameInput& in, const Sizes& s) {
  std::string o = "{\"id\":";
  put_string(o, s.job_id);
  o += ",\"name\":";
  put_string(o, in.info.job_name.empty() ? s.job_id : in.info.job_name);
  o += ",\"mode\":";
  put_string(o, in.info.mode);
  fmt::format_to(Out(o), ",\"world\":{},\"pp\":{},\"tp\":{},\"dp\":{},\"state\":", s.world, s.pp,
                 s.tp, s.dp);
  put_string(o, run_state(in.model));
  fmt::format_to(Out(o), ",\"step\":{},\"events\":{},\"categories\":[", in.model.newest_step(),
                 in.model.events());
  for (int c = 0; c < kMemCategories; ++c) {
    if (c) o += ',';
    put_string(o, to_string(static_cast<MemCategory>(c)));
  }
  o += "],\"planned\":";
  if (in.info.planned.empty()) {
    o += "null";
  } else {
    o += '[';
    for (size_t r = 0; r < in.info.planned.size(); ++r) {
      if (r) o += ',';
      fmt::format_to(Out(o), "[{}]", fmt::join(in.info.planned[r], ","));
    }
    o += ']';
  }
  fmt::format_to(Out(o), ",\"waits_known\":{}}}", in.model.comm().waits_known() ? "true" : "false");
  return o;
}

std::string replay_section(const ReplayPosition& p) {
  std::string o = "{\"duration\":";
  put_number(o, p.duration);
  o += ",\"position\":";
  put_number(o, p.position);
  fmt::format_to(Out(o), ",\"playing\":{},\"speed\":", p.playing ? "true" : "false");
  put_number(o, p.speed);
  fmt::format_to(Out(o), ",\"step\":{}}}", p.step);
  return o;
}

std::string rank_row(const FrameInput& in, int rank, const RankState& r) {
  std::string o;
  fmt::format_to(Out(o), "{{\"r\":{}", rank);
  if (r.hello) {
    fmt::format_to(Out(o), ",\"pp\":{},\"tp\":{},\"dp\":{},\"host\":", r.hello->pp_i, r.hello->tp_i,
                   r.hello->dp_i);
    put_string(o, r.hello->host);
  } else {
    o += ",\"pp\":null,\"tp\":null,\"dp\":null,\"host\":\"\"";
  }
  o += ",\"state\":";
  put_string(o, state_word(r.state));
  fmt::format_to(Out(o), ",\"step\":{},\"loss\":", r.step);
  put_number(o, r.loss);
  o += ",\"sps\":";
  put_number(o, r.step_seconds);
  fmt::format_to(Out(o), ",\"mem\":[{}],\"peak\":{},\"comm\":", fmt::join(r.memory, ","),
                 r.memory_peak);
  put_number(o, r.comm_seconds);
  const StepAccount w = in.model.time().window(rank);
  const bool shares = w.steps > 0 && w.seconds > 0;
  o += ",\"comp\":";
  shares ? put_number(o, w.share(w.compute)) : void(o += "null");
  o += ",\"wait\":";
  shares ? put_number(o, w.share(w.wait)) : void(o += "null");
  o += ",\"seen\":";
  put_time(o, r.last_seen);
  o += ",\"flags\":[";
  bool first = true;
  auto flag = [&](const char* f) {
    if (!first) o += ',';
    first = false;
    fmt::format_to(Out(o), "\"{}\"", f);
  };
  if (in.model.straggler(rank)) flag("STRAGGLER");
  if (in.model.silent(rank, in.now)) flag("SILENT");
  if (r.state == telemetry::JobState::failed) flag("FAILED");
  o += "],\"reason\":";
  put_string(o, in.model.failure_reason(rank));
  o += '}';
  return o;
}

std::string diagnosis_section(const RunModel& model) {
  const Diagnosis& d = model.diagnosis();
  std::string o;
  fmt::format_to(Out(o), "{{\"straggler\":{},\"bottleneck\":{},\"uneven\":{},\"lines\":[",
                 d.straggler ? d.straggler->rank : -1, d.bottleneck ? d.bottleneck->stage : -1,
                 d.uneven ? d.uneven->stage : -1);
  const std::vector<std::string> lines = model.diagnosis_lines();
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) o += ',';
    put_string(o, lines[i]);
  }
  o += "],\"busy\":[";
  for (size_t i = 0; i < d.stages.size(); ++i) {
    if (i) o += ',';
    put_number(o, d.stages[i].busy);
  }
  o += "]}";
  return o;
}

// Rank 0's training loss and evaluations (as the app's loss chart), from index `from`.
const RankState* rank0(const RunModel& model) {
  const auto it = model.ranks().find(0);
  return it == model.ranks().end() ? nullptr : &it->second;
}

// More points from `from` than a chart can show (a long run's full frame, or a burst): the whole
// series again from 0, every stride-th point and the newest, so a frame stays bounded. Returns the
// stride (1: every point) and moves `from` back to 0 when it thins.
size_t thin_points(size_t n, size_t& from) {
  if (n <= from || n - from <= kMaxLossPoints) return 1;
  from = 0;
  return (n + kMaxLossPoints - 1) / kMaxLossPoints;
}

std::string loss_section(const RunModel& model, size_t from) {
  const RankState* r = rank0(model);
  const size_t n = r ? r->loss_series.size() : 0;
  const size_t stride = thin_points(n, from);
  std::string o = fmt::format("{{\"from\":{},\"points\":[", from);
  // Point i of the model's series is its (i * series_stride + 1)-th step (RankState).
  const auto step_of = [&](size_t i) { return static_cast<int64_t>(i) * r->series_stride + 1; };
  for (size_t i = from; i < n; i += stride) {
    if (i > from) o += ',';
    fmt::format_to(Out(o), "[{},", step_of(i));
    put_number(o, r->loss_series[i]);
    o += ']';
    if (stride > 1 && i + stride >= n && i + 1 < n) {  // the newest point, always
      fmt::format_to(Out(o), ",[{},", step_of(n - 1));
      put_number(o, r->loss_series[n - 1]);
      o += ']';
    }
  }
  o += "]}";
  return o;
}

// Each point is [step, loss, accuracy, samples], the step the evaluation's own (the model keeps
// every eval_stride-th evaluation: RankState::evals). More than kMaxLossPoints are sent as the
// loss is: again from 0, every stride-th and the newest.
std::string evals_section(const RunModel& model, size_t from) {
  const RankState* r = rank0(model);
  const size_t n = r ? r->evals.size() : 0;
  const size_t stride = thin_points(n, from);
  std::string o = fmt::format("{{\"from\":{},\"points\":[", from);
  const auto put = [&](size_t i) {
    const telemetry::EvalEvent& e = r->evals[i];
    fmt::format_to(Out(o), "[{},", e.step);
    put_number(o, e.loss);
    o += ',';
    put_number(o, e.accuracy);
    fmt::format_to(Out(o), ",{}]", e.samples);
  };
  for (size_t i = from; i < n; i += stride) {
    if (i > from) o += ',';
    put(i);
    if (stride > 1 && i + stride >= n && i + 1 < n) {  // the newest, always
      o += ',';
      put(n - 1);
    }
  }
  o += "]}";
  return o;
}

std::pair<int64_t, int64_t> heat_window(const RunModel& model) {
  const CommStats& c = model.comm();
  const int64_t last = c.last_step();
  if (last <= 0) return {0, 0};
  return {std::max(c.first_step(), last - kHeatSteps + 1), last};
}

std::string heat_column(const RunModel& model, int64_t step, int world) {
  const CommStats& c = model.comm();
  std::string o = fmt::format("[{}", step);
  for (const StepMetric m : {StepMetric::comm, StepMetric::wait, StepMetric::compute}) {
    o += ",[";
    for (int r = 0; r < world; ++r) {
      if (r) o += ',';
      const double s = c.step_seconds(r, step, m);
      // Microsecond resolution is plenty for a colour, and keeps 1,024-rank columns small.
      if (s == 0)
        o += '0';
      else
        fmt::format_to(Out(o), "{:.4g}", s);
    }
    o += ']';
  }
  o += ']';
  return o;
}

std::string comm_section(const RunModel& model) {
  std::string o = "[";
  bool first = true;
  for (const auto& [key, a] : model.comm().by_key()) {
    if (!first) o += ',';
    first = false;
    o += '[';
    put_string(o, key.op);
    o += ',';
    put_string(o, key.group);
    fmt::format_to(Out(o), ",{},{},", a.count, a.bytes);
    put_number(o, a.seconds);
    o += ',';
    put_number(o, a.mean_busbw());
    o += ',';
    put_number(o, a.max_seconds);
    fmt::format_to(Out(o), ",{}]", a.failed);
  }
  o += ']';
  return o;
}

std::string timeline_section(const RunModel& model, int straggler) {
  const Timeline& tl = model.timeline();
  const auto [t0, t1] = tl.recent_window(kTimelineSteps);
  std::string o = "{\"t0\":";
  put_time(o, t0);
  o += ",\"t1\":";
  put_time(o, t1);
  o += ",\"lanes\":[";
  if (t1 > t0) {
    // The first kTimelineLanes ranks; a straggler beyond them takes the last lane, so the rank
    // the diagnosis names is always drawn.
    std::vector<int> lanes;
    for (int r = 0; r < tl.ranks() && static_cast<int>(lanes.size()) < kTimelineLanes; ++r)
      lanes.push_back(r);
    if (straggler >= kTimelineLanes && straggler < tl.ranks() && !lanes.empty())
      lanes.back() = straggler;
    bool first_lane = true;
    for (const int r : lanes) {
      if (!first_lane) o += ',';
      first_lane = false;
      fmt::format_to(Out(o), "[{},[", r);
      bool first = true;
      for (const Span& s : tl.spans(r)) {
        if (s.end < t0 || s.start > t1) continue;
        if (!first) o += ',';
        first = false;
        fmt::format_to(Out(o), "[\"{}\",{:.6f},{:.6f},{},", to_string(s.kind),
                       std::max(0.0, s.start - t0), s.end - t0, s.micro_batch);
        put_string(o, s.kind == SpanKind::collective && s.label < tl.labels().size()
                          ? tl.labels()[s.label]
                          : std::string());
        o += ']';
      }
      o += "]]";
    }
  }
  o += "]}";
  return o;
}

}  // namespace

// {"paused", "free", "why_free", "held", "step", "phases", "last_phase", "viewer_timeout_s"}, or
// null for a run without teaching mode.
std::string teaching_section(const TeachingStatus* t) {
  if (t == nullptr) return "null";
  std::string o = fmt::format("{{\"paused\":{},\"free\":{},\"why_free\":", t->paused, t->free);
  put_string(o, t->why_free);
  fmt::format_to(Out(o), ",\"held\":{},\"step\":{},\"phases\":{},\"last_phase\":", t->held, t->step,
                 t->passed);
  put_string(o, t->last_phase);
  o += ",\"viewer_timeout_s\":";
  put_number(o, t->viewer_timeout_s);
  o += ",\"banner\":";
  put_string(o, teaching_banner(*t));
  o += '}';
  return o;
}

std::string json_string(const std::string& text) {
  std::string o;
  put_string(o, text);
  return o;
}

std::string json_number(double value) {
  std::string o;
  put_number(o, value);
  return o;
}

std::string run_state(const RunModel& model) {
  if (model.ranks().empty()) return "waiting";
  bool any_failed = false, any_running = false;
  for (const auto& [rank, r] : model.ranks()) {
    any_failed |= r.state == telemetry::JobState::failed;
    any_running |= r.state == telemetry::JobState::running;
  }
  if (any_failed) return "failed";
  if (model.all_done()) return "finished";
  return any_running ? "running" : "starting";
}

FrameBuilder::Frame FrameBuilder::build(const FrameInput& in, bool want_full) {
  const Sizes s = sizes_of(in.model);
  const RankState* r0 = rank0(in.model);
  const size_t losses = r0 ? r0->loss_series.size() : 0;
  const size_t evals = r0 ? r0->evals.size() : 0;

  std::string job = job_section(in, s);
  std::string replay = in.replay ? replay_section(*in.replay) : std::string();
  std::string diagnosis = diagnosis_section(in.model);
  std::string comm = comm_section(in.model);
  std::string teaching = teaching_section(in.teaching);
  // Who holds what changes only when a LAYOUT arrives: built again only then.
  const bool layout_changed = in.model.layouts() != layouts_;
  std::string layout = layout_changed ? layout_section(in.model) : layout_;
  const int straggler = in.model.diagnosis().straggler ? in.model.diagnosis().straggler->rank : -1;
  // The timeline (the largest section: every span of the last steps) goes to delta viewers at
  // most once per kTimelineSeconds; a full frame always has the newest.
  const auto wall = std::chrono::steady_clock::now();
  const bool timeline_due =
      number_ == 0 || wall - timeline_at_ >= std::chrono::duration<double>(timeline_seconds_);
  std::string timeline =
      timeline_due || want_full ? timeline_section(in.model, straggler) : std::string();
  // The newest complete step phase by phase (net/web/step_json.h): as often as the timeline.
  std::string step = timeline_due || want_full ? step_section(in.model) : std::string();
  std::vector<std::string> rows(static_cast<size_t>(s.world), "null");
  for (const auto& [rank, r] : in.model.ranks())
    if (rank >= 0 && rank < s.world) rows[static_cast<size_t>(rank)] = rank_row(in, rank, r);
  const auto [first, last] = heat_window(in.model);
  // A column is final once every rank has reported that step (a rank's events of a step come
  // before its STEP): those are kept from the previous build, not formatted again.
  int64_t final_step = std::numeric_limits<int64_t>::max();
  for (const auto& [rank, r] : in.model.ranks()) final_step = std::min(final_step, r.step);
  if (static_cast<int>(in.model.ranks().size()) < s.world) final_step = 0;
  std::map<int64_t, std::string> heat;
  if (last > 0)
    for (int64_t step = first; step <= last; ++step) {
      const auto old = heat_.find(step);
      if (step <= final_step_ && old != heat_.end() && world_ == s.world)
        heat.emplace(step, old->second);
      else
        heat.emplace(step, heat_column(in.model, step, s.world));
    }

  // A loss series that shrank (a restarted rank 0 starting afresh) is sent whole in the delta.
  // (or thinned: RankState::series_stride changed)
  const int64_t loss_stride = r0 ? r0->series_stride : 1;
  const bool loss_restart = losses < loss_sent_ || loss_stride != loss_stride_;
  const size_t loss_from = loss_restart ? 0 : loss_sent_;
  // The same for the evaluations (RankState::eval_stride).
  const int64_t evals_stride = r0 ? r0->eval_stride : 1;
  const bool evals_restart = evals < evals_sent_ || evals_stride != evals_stride_;
  const size_t evals_from = evals_restart ? 0 : evals_sent_;

  Frame frame;
  const auto head = [&](const char* type, uint64_t number) {
    std::string o = fmt::format("{{\"type\":\"{}\",\"frame\":{},\"now\":", type, number);
    put_time(o, in.now);
    return o;
  };
  // The delta against the previous build.
  if (number_ > 0) {
    std::string d;
    bool changed = false;
    auto section = [&](const char* name, const std::string& now, const std::string& before) {
      if (now == before) return;
      changed = true;
      fmt::format_to(Out(d), ",\"{}\":{}", name, now);
    };
    section("job", job, job_);
    if (in.replay) section("replay", replay, replay_);
    std::string changed_rows;
    for (size_t r = 0; r < rows.size(); ++r) {
      if (r < rows_.size() && rows[r] == rows_[r]) continue;
      fmt::format_to(Out(changed_rows), "{}\"{}\":{}", changed_rows.empty() ? "" : ",", r, rows[r]);
    }
    if (!changed_rows.empty()) {
      changed = true;
      d += ",\"ranks\":{" + changed_rows + "}";
    }
    section("diagnosis", diagnosis, diagnosis_);
    if (losses != loss_sent_ || loss_restart) {
      changed = true;
      d += ",\"loss\":" + loss_section(in.model, loss_from);
    }
    if (evals != evals_sent_ || evals_restart) {
      changed = true;
      d += ",\"evals\":" + evals_section(in.model, evals_from);
    }
    std::string cols;
    for (const auto& [step, col] : heat) {
      const auto it = heat_.find(step);
      if (it != heat_.end() && it->second == col) continue;
      cols += (cols.empty() ? "" : ",") + col;
    }
    const bool window_moved =
        (heat.empty() != heat_.empty()) ||
        (!heat.empty() && !heat_.empty() && heat.begin()->first != heat_.begin()->first);
    if (!cols.empty() || window_moved) {
      changed = true;
      fmt::format_to(Out(d), ",\"heat\":{{\"first\":{},\"last\":{},\"cols\":[{}]}}", first, last,
                     cols);
    }
    section("comm", comm, comm_);
    section("layout", layout, layout_);
    section("teaching", teaching, teaching_);
    if (timeline_due) section("timeline", timeline, timeline_);
    if (timeline_due) section("step", step, step_);
    if (changed) {
      ++number_;
      frame.delta = std::make_shared<const std::string>(head("delta", number_) + d + "}");
    }
  } else {
    number_ = 1;
  }
  frame.number = number_;

  if (want_full) {
    std::string f = head("full", number_);
    fmt::format_to(Out(f), ",\"job\":{}", job);
    if (in.replay) fmt::format_to(Out(f), ",\"replay\":{}", replay);
    f += ",\"ranks\":[";
    for (size_t r = 0; r < rows.size(); ++r) {
      if (r) f += ',';
      f += rows[r];
    }
    fmt::format_to(Out(f), "],\"diagnosis\":{},\"loss\":{},\"evals\":{}", diagnosis,
                   loss_section(in.model, 0), evals_section(in.model, 0));
    fmt::format_to(Out(f), ",\"heat\":{{\"first\":{},\"last\":{},\"cols\":[", first, last);
    bool first_col = true;
    for (const auto& [step, col] : heat) {
      if (!first_col) f += ',';
      first_col = false;
      f += col;
    }
    fmt::format_to(Out(f),
                   "]}},\"comm\":{},\"layout\":{},\"teaching\":{},\"timeline\":{},\"step\":{}}}",
                   comm, layout, teaching, timeline, step);
    frame.full = std::make_shared<const std::string>(std::move(f));
  }

  job_ = std::move(job);
  replay_ = std::move(replay);
  diagnosis_ = std::move(diagnosis);
  comm_ = std::move(comm);
  layout_ = std::move(layout);
  teaching_ = std::move(teaching);
  layouts_ = in.model.layouts();
  if (timeline_due) {
    timeline_ = std::move(timeline);
    step_ = std::move(step);
    timeline_at_ = wall;
  }
  rows_ = std::move(rows);
  heat_ = std::move(heat);
  final_step_ = final_step;
  world_ = s.world;
  loss_sent_ = losses;
  loss_stride_ = loss_stride;
  evals_sent_ = evals;
  evals_stride_ = evals_stride;
  return frame;
}

std::string full_state(const FrameInput& in) {
  FrameBuilder b;
  std::string s = *b.build(in, true).full;
  // /api/run is not part of a stream: frame 0.
  const std::string from = "\"frame\":1,";
  if (const size_t at = s.find(from); at != std::string::npos)
    s.replace(at, from.size(), "\"frame\":0,");
  return s;
}

}  // namespace shardlab::net
