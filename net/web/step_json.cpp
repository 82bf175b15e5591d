#include "net/web/step_json.h"

#include <fmt/format.h>

#include <iterator>

#include "engine/core/json_text.h"
#include "net/step_replay.h"

namespace shardlab::net {

namespace {

using Out = std::back_insert_iterator<std::string>;

void put_frame(std::string& o, const ReplayFrame& f, double t0) {
  fmt::format_to(Out(o), "{{\"kind\":\"{}\",\"title\":", to_string(f.kind));
  append_json_string(o, f.title);
  o += ",\"explain\":";
  append_json_string(o, f.explain);
  fmt::format_to(Out(o), ",\"start\":{:.6f},\"end\":{:.6f},\"stage\":{},\"micro_batch\":{},\"op\":",
                 f.start - t0, f.end - t0, f.stage, f.micro_batch);
  append_json_string(o, f.op);
  o += ",\"group\":";
  append_json_string(o, f.group);
  fmt::format_to(Out(o), ",\"array\":\"{}\",\"unit\":{},\"inside\":{},\"ranks\":[",
                 telemetry::to_string(f.array), f.unit, f.inside);
  for (size_t i = 0; i < f.ranks.size(); ++i) {
    const ReplayRank& r = f.ranks[i];
    fmt::format_to(Out(o), "{}{{\"rank\":{},\"start\":{:.6f},\"end\":{:.6f},\"touches\":[",
                   i ? "," : "", r.rank, r.start - t0, r.end - t0);
    for (size_t j = 0; j < r.touches.size(); ++j) {
      const ReplayTouch& t = r.touches[j];
      fmt::format_to(Out(o), "{}{{\"lane\":\"{}\",\"role\":\"{}\",\"ranges\":[", j ? "," : "",
                     to_string(t.lane), to_string(t.role));
      for (size_t k = 0; k < t.ranges.size(); ++k)
        fmt::format_to(Out(o), "{}[{},{}]", k ? "," : "", t.ranges[k].begin, t.ranges[k].end);
      o += "]}";
    }
    o += "]}";
  }
  o += "]}";
}

}  // namespace

std::string step_section(const RunModel& model, int64_t step) {
  const StepReplay replay = replay_step(model, step);
  std::string o;
  fmt::format_to(Out(o), "{{\"step\":{},\"first\":{},\"last\":{},\"strategy\":", replay.step,
                 replay.steps.empty() ? 0 : replay.steps.front(),
                 replay.steps.empty() ? 0 : replay.steps.back());
  append_json_string(o, replay.strategy);
  o += ",\"note\":";
  append_json_string(o, replay.note);
  o += ",\"frames\":[";
  const double t0 = replay.frames.empty() ? 0 : replay.frames.front().start;
  const size_t n = std::min(replay.frames.size(), kMaxStepFrames);
  for (size_t i = 0; i < n; ++i) {
    if (i) o += ',';
    put_frame(o, replay.frames[i], t0);
  }
  fmt::format_to(Out(o), "],\"truncated\":{}}}", n < replay.frames.size() ? "true" : "false");
  return o;
}

}  // namespace shardlab::net
