// What the web dashboard is sent: the run's state as JSON "frames", built from a RunModel. A full
// frame holds everything the page draws; a delta frame only the sections that changed since the
// previous frame (rank rows that changed, loss and evaluation points appended, heat-map columns
// new or still filling), so a viewer of a steady 8-rank run receives a few kilobytes a second.
// The format is documented for the page's authors in resources/web/README.md; /api/run is
// full_state().
//
// One FrameBuilder per stream of frames: a live server has one, shared by every viewer (a frame is
// built once per tick whatever the number of viewers); a replay viewer has its own.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/telemetry/teaching_gate.h"
#include "net/run_model.h"

namespace shardlab::net {

// What the server knows beyond the events.
struct DashboardInfo {
  std::string mode = "live";  // "live" or "replay"
  std::string job_name;       // shown when no HELLO has come yet ("" the HELLOs' job id)
  // The planner's steady bytes per world rank by category (engine/plan/memory/planner.h
  // plan_job_memory); empty when the job is unknown (a monitor given no job file).
  std::vector<std::array<int64_t, kMemCategories>> planned;
};

// Where a replay viewer stands (DashboardInfo::mode "replay").
struct ReplayPosition {
  double duration = 0;  // seconds from the first to the last event
  double position = 0;  // seconds from the first event
  bool playing = false;
  double speed = 1;
  int64_t step = 0;
};

struct FrameInput {
  const RunModel& model;
  const DashboardInfo& info;
  double now = 0;  // epoch seconds (a replay: the time of its position)
  const ReplayPosition* replay = nullptr;
  // A teaching run's gate (engine/telemetry/teaching_gate.h) as it stands: the "teaching"
  // section; null: none (not a teaching run).
  const TeachingStatus* teaching = nullptr;
};

// A frame carries at most about this many loss points: a longer series (or burst) is sent whole
// again, thinned to every k-th point and the newest.
inline constexpr size_t kMaxLossPoints = 4000;
// The heat map window: the newest this many steps.
inline constexpr int64_t kHeatSteps = 64;
// The timeline: the last this many steps, at most this many ranks' lanes.
inline constexpr int kTimelineSteps = 3;
inline constexpr int kTimelineLanes = 16;
// Delta frames carry the timeline at most this often (it is most of a frame's bytes).
inline constexpr double kTimelineSeconds = 1.0;

class FrameBuilder {
 public:
  // timeline_seconds: how often at most a delta carries the timeline (0: whenever it changed).
  explicit FrameBuilder(double timeline_seconds = kTimelineSeconds)
      : timeline_seconds_(timeline_seconds) {}
  struct Frame {
    uint64_t number = 0;                       // 0 until the first build
    std::shared_ptr<const std::string> full;   // null unless asked for
    std::shared_ptr<const std::string> delta;  // null when nothing changed (or the first frame)
  };
  // Builds the frame after the previous one: its delta against the previous build (null when
  // nothing the page draws changed: the frame number then stays) and, when `want_full`, the whole
  // state. A viewer holding frame number n - 1 can take the delta of frame n; any other needs full.
  Frame build(const FrameInput& in, bool want_full);
  uint64_t number() const { return number_; }

 private:
  uint64_t number_ = 0;
  std::string job_, replay_, diagnosis_, comm_;
  std::string timeline_;  // as the delta viewers have it
  std::string step_;      // net/web/step_json.h, as the delta viewers have it
  std::string teaching_;
  std::string layout_ = "null";  // net/web/layout_json.h, built when RunModel::layouts() changes
  uint64_t layouts_ = 0;
  std::chrono::steady_clock::time_point timeline_at_{};
  double timeline_seconds_;
  std::vector<std::string> rows_;
  size_t loss_sent_ = 0, evals_sent_ = 0;
  int64_t loss_stride_ = 1, evals_stride_ = 1;
  std::map<int64_t, std::string> heat_;  // step -> column
  int world_ = 0;                        // of the previous build
  int64_t final_step_ = 0;  // every rank of the world had reported this step at the previous build
};

// The whole state as one JSON document: a full frame (frame number 0), for /api/run.
std::string full_state(const FrameInput& in);

// The run as a whole: "waiting" (no rank yet), "failed" (any rank failed), "finished" (all done),
// "running" (any rank running), else "starting".
std::string run_state(const RunModel& model);

// JSON helpers shared with the metrics and the server: a string literal with its quotes, escaped;
// a number (non-finite: null).
std::string json_string(const std::string& text);
std::string json_number(double value);

}  // namespace shardlab::net
