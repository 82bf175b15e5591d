// The web dashboard's frames (net/web/dashboard_frames.h) without sockets: a full frame is JSON
// with every section of the wire format (/tmp/web_schema.md, resources/web/README.md) holding
// what the events said; a build with nothing new is no frame; a delta holds only what changed
// (rank rows, appended loss points, new or filling heat-map columns); strings of any content
// are escaped; a 1,024-rank frame is whole. Deltas are merged by the format's rules, as the page
// merges them (tests/net/frame_merge.h), and the result compared with full_state().
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "net/run_model.h"
#include "net/web/dashboard_frames.h"
#include "tests/common/telemetry_events.h"
#include "tests/net/frame_merge.h"

using namespace shardlab;
using namespace shardlab::net;
namespace tl = shardlab::telemetry;
using nlohmann::json;
using test::apply_frame;
using test::EventFeeder;
using test::grid_hello;
using test::make_step;

namespace {

// Builders that send the timeline in every delta, so merged deltas equal the whole state at each
// step (the server's default sends it at most once per kTimelineSeconds: timelineIsThrottled).
constexpr double kEveryTick = 0.0;

constexpr double kT0 = 1.7e9;
const std::vector<std::string> kCategories = {"params", "grads", "optimizer_state", "activations",
                                              "comm"};
// Sections every full frame has (replay only in replay mode).
const std::vector<std::string> kSections = {"job",   "ranks", "diagnosis", "loss",
                                            "evals", "heat",  "comm",      "timeline"};

Hello hello(int rank, int world, int pp, int tp, int dp, const std::string& host = "") {
  Hello h = grid_hello("job-frames", rank, world, pp, tp, dp);
  h.host = host.empty() ? "node" + std::to_string(rank / 4) : host;
  h.pid = 100 + rank;
  return h;
}

tl::CollectiveEvent collective(const std::string& op, const std::string& group, double start,
                               double duration, double wait, int last, int64_t bytes = 4096,
                               double busbw = 2.0, bool ok = true) {
  tl::CollectiveEvent c;
  c.op = op;
  c.group = group;
  c.bytes = bytes;
  c.start = start;
  c.duration = duration;
  c.algbw = busbw / 2;
  c.busbw = busbw;
  c.ok = ok;
  c.wait = wait;
  c.last_rank = last;
  return c;
}

json parse(const std::shared_ptr<const std::string>& text) {
  if (!text) return json();
  return json::parse(*text, nullptr, false);
}

bool near(double a, double b, double rel = 1e-5, double abs = 1e-9) {
  return std::abs(a - b) <= std::max(abs, rel * std::max(std::abs(a), std::abs(b)));
}

// Where the merged state differs from a full frame ("" when nowhere).
std::string compare_state(const json& state, const json& full) {
  std::string out;
  std::vector<std::string> sections = kSections;
  if (full.contains("replay")) sections.push_back("replay");
  for (const std::string& s : sections) {
    json a = state.value(s, json()), b = full.value(s, json());
    if (s == "loss" || s == "evals") {
      a["from"] = 0;
      b["from"] = 0;
    }
    if (a != b)
      out +=
          s + ": merged " + a.dump().substr(0, 600) + "\n  full " + b.dump().substr(0, 600) + "\n";
  }
  return out;
}

// A stream of builds as one viewer receives them: every delta merged.
struct Viewer {
  json state;
  uint64_t frame = 0;
  std::string error;

  void take(const FrameBuilder::Frame& f) {
    if (!f.delta) return;
    if (f.number != frame + 1)
      error += "delta " + std::to_string(f.number) + " after " + std::to_string(frame) + "\n";
    const json d = parse(f.delta);
    if (d.is_discarded()) error += "delta is not JSON\n";
    if (d.value("frame", uint64_t{0}) != f.number) error += "delta's frame number\n";
    error += apply_frame(state, d);
    frame = f.number;
  }
  void take_full(const FrameBuilder::Frame& f) {
    const json j = parse(f.full);
    if (j.is_discarded()) error += "full is not JSON\n";
    error += apply_frame(state, j);
    frame = f.number;
  }
};

// The per-step seconds a heat-map column shows, worked out from the events fed.
struct HeatCell {
  double comm = 0, wait = 0, compute = 0;
};

// Feeds a model and keeps what the frames should say, independently of the model.
struct Scenario {
  RunModel model;
  EventFeeder feed{model};
  int world = 0;
  std::map<int, int64_t> current_step;               // last STEP + 1, per rank
  std::map<std::pair<int, int64_t>, HeatCell> heat;  // (rank, step) -> seconds
  std::vector<std::pair<int64_t, double>> loss0;     // rank 0's (step, loss)
  std::map<int, double> seen;
  uint64_t events = 0;
  int64_t newest = 0;

  void hellos(int w, int pp, int tp, int dp) {
    world = w;
    for (int r = 0; r < w; ++r) model.add(Message(hello(r, w, pp, tp, dp)));
  }
  int64_t cur(int r) { return current_step.count(r) ? current_step[r] : 1; }
  void add(int r, double t, const tl::Payload& p) {
    feed.add(r, t, p);
    ++events;
    seen[r] = std::max(seen[r], t);
    if (const auto* s = std::get_if<tl::StepEvent>(&p)) {
      current_step[r] = s->step + 1;
      newest = std::max(newest, s->step);
      if (r == 0) loss0.emplace_back(s->step, s->loss);
    } else if (const auto* c = std::get_if<tl::CollectiveEvent>(&p)) {
      HeatCell& h = heat[{r, cur(r)}];
      h.comm += c->duration;
      if (c->wait >= 0) h.wait += std::min(c->wait, c->duration);
    } else if (const auto* ph = std::get_if<tl::PhaseEvent>(&p)) {
      heat[{r, cur(r)}].compute += ph->end - ph->start;
    }
  }
  // One training step n of every rank: forward, backward, a dp all-reduce (rank `slow` last),
  // optimizer, STEP.
  void step(int64_t n, int slow = -1) {
    const double t = kT0 + static_cast<double>(n);
    for (int r = 0; r < world; ++r) {
      const double fwd = 0.1 + 0.01 * r, bwd = 0.2;
      add(r, t + fwd, tl::PhaseEvent{0, 0, tl::Phase::forward, t, t + fwd});
      add(r, t + fwd + bwd, tl::PhaseEvent{0, 0, tl::Phase::backward, t + fwd, t + fwd + bwd});
      const double w = slow < 0 || r == slow ? 0.0 : 0.25;
      const double d = 0.05 + w;
      add(r, t + fwd + bwd + d,
          collective("all_reduce", "dp[0]", t + fwd + bwd, d, w, slow < 0 ? r : slow));
      add(r, t + 0.9, make_step(n, 5.0 / static_cast<double>(n + r), 0.9));
    }
  }
  int64_t heat_last() const {
    int64_t last = 0;
    for (const auto& [key, cell] : heat) last = std::max(last, key.second);
    return last;
  }
};

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + static_cast<size_t>(n) >= s.size()) return false;
    for (int k = 1; k <= n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += static_cast<size_t>(n) + 1;
  }
  return true;
}

FrameInput input(const RunModel& m, const DashboardInfo& info, double now,
                 const ReplayPosition* replay = nullptr) {
  return FrameInput{m, info, now, replay};
}

// The heat map's tests' start: a data-parallel run of 4 ranks after step 1 (rank `slow` the last
// in its all-reduce), one builder (the timeline in every delta) at kT0 + 100, and a viewer that
// took the first frame in full.
struct HeatRun {
  explicit HeatRun(int slow = -1) {
    sc.hellos(4, 1, 1, 4);
    sc.step(1, slow);
    v.take_full(b.build(input(sc.model, info, now), true));
  }
  Scenario sc;
  DashboardInfo info;
  FrameBuilder b{kEveryTick};
  double now = kT0 + 100;
  Viewer v;
};

// Where a viewer's merged `state` differs from a full frame of `m` at `now` ("" when nowhere).
std::string diff_from_full(const json& state, const RunModel& m, const DashboardInfo& info,
                           double now) {
  return compare_state(state, json::parse(full_state(input(m, info, now))));
}

}  // namespace

class TestDashboardFrames : public QObject {
  Q_OBJECT

 private slots:
  // The merge (tests/net/frame_merge.h) does what the format says (so comparisons through it
  // mean something).
  void mergeRules() {
    json s;
    QVERIFY(!apply_frame(s, json{{"type", "delta"}}).empty());  // nothing to apply to
    QCOMPARE(apply_frame(s, json::parse(R"({"type":"full","frame":3,"now":1,"job":{"a":1},
        "ranks":[null,{"r":1}],"loss":{"from":0,"points":[[1,2],[2,3]]},
        "heat":{"first":1,"last":2,"cols":[[1,[0]],[2,[0]]]}})")),
             std::string());
    QCOMPARE(apply_frame(s, json::parse(R"({"type":"delta","frame":4,"now":2,
        "ranks":{"0":{"r":0},"3":{"r":3}},"loss":{"from":2,"points":[[3,4]]},
        "heat":{"first":2,"last":3,"cols":[[2,[1]],[3,[2]]]}})")),
             std::string());
    QCOMPARE(s["job"], json::parse(R"({"a":1})"));
    QCOMPARE(s["ranks"], json::parse(R"([{"r":0},{"r":1},null,{"r":3}])"));
    QCOMPARE(s["loss"]["points"], json::parse("[[1,2],[2,3],[3,4]]"));
    QCOMPARE(s["heat"]["cols"], json::parse("[[2,[1]],[3,[2]]]"));
    QVERIFY(
        !apply_frame(s, json::parse(R"({"type":"delta","loss":{"from":9,"points":[]}})")).empty());
    QVERIFY(!apply_frame(s, json::parse(R"({"type":"delta","loss":{"from":0}})")).empty());
    QVERIFY(!apply_frame(s, json::parse(R"({"type":"delta","heat":{"first":1}})")).empty());
  }

  // A full frame: JSON with every section, each holding what the events said.
  void fullFrameHasEverySection() {
    Scenario sc;
    sc.hellos(8, 2, 2, 2);
    for (int64_t n = 1; n <= 4; ++n) sc.step(n);
    tl::MemoryEvent mem;
    mem.current = {1000, 2000, 3000, 4000, 5000};
    mem.peak = mem.current;
    sc.add(3, kT0 + 4.95, mem);
    mem.current = {1000, 2000, 3000, 100, 5000};
    sc.add(3, kT0 + 4.96, mem);
    sc.add(0, kT0 + 4.97, tl::EvalEvent{4, 0.5, 0.875, 1000});
    sc.add(6, kT0 + 4.98, tl::JobStateEvent{tl::JobState::failed, "out of memory"});
    DashboardInfo info;
    info.job_name = "my-job";
    info.planned.assign(8, {10, 20, 30, 0, 0});
    const double now = kT0 + 5;
    FrameBuilder b(kEveryTick);
    const FrameBuilder::Frame f = b.build(input(sc.model, info, now), true);
    QVERIFY(f.full);
    QVERIFY(!f.delta);  // the first build has nothing to be a delta of
    QCOMPARE(f.number, uint64_t{1});
    const json j = parse(f.full);
    QVERIFY2(!j.is_discarded(), f.full->substr(0, 2000).c_str());
    QCOMPARE(j["type"], json("full"));
    QCOMPARE(j["frame"].get<uint64_t>(), uint64_t{1});
    QVERIFY(near(j["now"].get<double>(), now, 0, 1e-3));
    for (const std::string& s : kSections) QVERIFY2(j.contains(s), s.c_str());
    QVERIFY(!j.contains("replay"));  // live

    const json& job = j["job"];
    QCOMPARE(job["id"], json("job-frames"));
    QCOMPARE(job["name"], json("my-job"));
    QCOMPARE(job["mode"], json("live"));
    QCOMPARE(job["world"], json(8));
    QCOMPARE(job["pp"], json(2));
    QCOMPARE(job["tp"], json(2));
    QCOMPARE(job["dp"], json(2));
    QCOMPARE(job["state"], json("failed"));  // one rank failed
    QCOMPARE(job["step"].get<int64_t>(), sc.newest);
    QCOMPARE(job["events"].get<uint64_t>(), sc.events);
    QCOMPARE(job["categories"], json(kCategories));
    QCOMPARE(job["planned"].size(), size_t{8});
    QCOMPARE(job["planned"][5], json::parse("[10,20,30,0,0]"));
    QCOMPARE(job["waits_known"], json(true));

    const json& ranks = j["ranks"];
    QVERIFY(ranks.is_array());
    QCOMPARE(ranks.size(), size_t{8});
    for (int r = 0; r < 8; ++r) {
      const json& row = ranks[static_cast<size_t>(r)];
      const Hello h = hello(r, 8, 2, 2, 2);
      QCOMPARE(row["r"], json(r));
      QCOMPARE(row["pp"], json(h.pp_i));
      QCOMPARE(row["tp"], json(h.tp_i));
      QCOMPARE(row["dp"], json(h.dp_i));
      QCOMPARE(row["host"], json(h.host));
      QCOMPARE(row["state"], json(r == 6 ? "failed" : "running"));
      QCOMPARE(row["step"], json(4));
      QVERIFY(near(row["loss"].get<double>(), 5.0 / (4 + r)));
      QVERIFY(near(row["sps"].get<double>(), 0.9));
      const std::vector<int64_t> want_mem =
          r == 3 ? std::vector<int64_t>{1000, 2000, 3000, 100, 5000} : std::vector<int64_t>(5, 0);
      QCOMPARE(row["mem"].get<std::vector<int64_t>>(), want_mem);
      QCOMPARE(row["peak"].get<int64_t>(), r == 3 ? int64_t{15000} : int64_t{0});
      QVERIFY(near(row["comm"].get<double>(), 4 * 0.05));  // no waits: 50 ms per step
      for (const char* share : {"comp", "wait"})
        QVERIFY(row[share].is_null() || (row[share].is_number() && row[share] >= 0));
      QVERIFY(near(row["seen"].get<double>(), sc.seen[r], 0, 6e-4));
      QVERIFY(row["flags"].is_array());
      const bool failed =
          std::find(row["flags"].begin(), row["flags"].end(), json("FAILED")) != row["flags"].end();
      QCOMPARE(failed, r == 6);
      QCOMPARE(row["reason"], json(r == 6 ? "out of memory" : ""));
    }

    const json& d = j["diagnosis"];
    QVERIFY(d["straggler"].is_number_integer());
    QVERIFY(d["bottleneck"].is_number_integer());
    QVERIFY(d["uneven"].is_number_integer());
    QVERIFY(d["lines"].is_array());
    QVERIFY(d["busy"].is_array());

    QCOMPARE(j["loss"]["from"], json(0));
    QCOMPARE(j["loss"]["points"].size(), sc.loss0.size());
    for (size_t i = 0; i < sc.loss0.size(); ++i) {
      QCOMPARE(j["loss"]["points"][i][0].get<int64_t>(), sc.loss0[i].first);
      QVERIFY(near(j["loss"]["points"][i][1].get<double>(), sc.loss0[i].second));
    }
    QCOMPARE(j["evals"], json::parse(R"({"from":0,"points":[[4,0.5,0.875,1000]]})"));

    const json& heat = j["heat"];
    QCOMPARE(heat["first"], json(1));
    QCOMPARE(heat["last"].get<int64_t>(), sc.heat_last());
    QCOMPARE(heat["cols"].size(), size_t(sc.heat_last()));
    for (const json& col : heat["cols"]) {
      const int64_t step = col[0];
      for (int r = 0; r < 8; ++r) {
        const HeatCell& want = sc.heat[{r, step}];
        QVERIFY(near(col[1][r].get<double>(), want.comm, 1e-3));
        QVERIFY(near(col[2][r].get<double>(), want.wait, 1e-3));
        QVERIFY(near(col[3][r].get<double>(), want.compute, 1e-3));
      }
    }

    // comm: one row per (op, group), summed here.
    QCOMPARE(j["comm"].size(), size_t{1});
    const json& c = j["comm"][0];
    QCOMPARE(c[0], json("all_reduce"));
    QCOMPARE(c[1], json("dp[0]"));
    QCOMPARE(c[2], json(8 * 4));               // count
    QCOMPARE(c[3], json(int64_t{4096} * 32));  // bytes
    QVERIFY(near(c[4].get<double>(), 32 * 0.05));
    QVERIFY(near(c[5].get<double>(), 2.0));  // busbw, time-weighted
    QVERIFY(near(c[6].get<double>(), 0.05));
    QCOMPARE(c[7], json(0));

    const json& timeline = j["timeline"];
    QVERIFY(timeline["t0"].is_number());
    QVERIFY(timeline["t1"].get<double>() > timeline["t0"].get<double>());
    QVERIFY(!timeline["lanes"].empty());
    QVERIFY(timeline["lanes"].size() <= size_t(kTimelineLanes));
    const std::set<std::string> kinds = {"forward", "backward", "optimizer", "collective"};
    for (const json& lane : timeline["lanes"]) {
      QVERIFY(lane[0].is_number_integer());
      for (const json& span : lane[1]) {
        QVERIFY2(kinds.count(span[0].get<std::string>()), span.dump().c_str());
        QVERIFY(span[2].get<double>() >= span[1].get<double>());
        if (span[0] == "collective")
          QCOMPARE(span[4], json("all_reduce dp[0]"));
        else
          QCOMPARE(span[4], json(""));
      }
    }

    // A replay position adds its section.
    ReplayPosition pos;
    pos.duration = 42.5;
    pos.position = 12.25;
    pos.playing = true;
    pos.speed = 4;
    pos.step = 3;
    info.mode = "replay";
    FrameBuilder rb(kEveryTick);
    const json rj = parse(rb.build(input(sc.model, info, now, &pos), true).full);
    QCOMPARE(rj["job"]["mode"], json("replay"));
    QCOMPARE(
        rj["replay"],
        json::parse(R"({"duration":42.5,"position":12.25,"playing":true,"speed":4,"step":3})"));

    // Nothing yet: waiting, no rows.
    RunModel empty;
    DashboardInfo none;
    const json e = json::parse(full_state(input(empty, none, now)), nullptr, false);
    QVERIFY(!e.is_discarded());
    QCOMPARE(e["frame"], json(0));
    QCOMPARE(e["job"]["state"], json("waiting"));
    QCOMPARE(e["job"]["planned"], json(nullptr));
    QCOMPARE(e["ranks"], json::array());
    for (const std::string& s : kSections) QVERIFY2(e.contains(s), s.c_str());
  }

  // Nothing new: no delta and the same frame number (a full frame on demand keeps it too).
  void nothingChangedIsNoFrame() {
    Scenario sc;
    sc.hellos(4, 1, 1, 4);
    sc.step(1);
    DashboardInfo info;
    FrameBuilder b(kEveryTick);
    const double now = kT0 + 2;
    QCOMPARE(b.build(input(sc.model, info, now), true).number, uint64_t{1});
    for (int i = 0; i < 3; ++i) {
      const FrameBuilder::Frame f = b.build(input(sc.model, info, now), i == 1);
      QVERIFY(!f.delta);
      QCOMPARE(f.number, uint64_t{1});
      QCOMPARE(bool(f.full), i == 1);
    }
    QCOMPARE(b.number(), uint64_t{1});
    sc.step(2);
    const FrameBuilder::Frame f = b.build(input(sc.model, info, now), false);
    QVERIFY(f.delta);
    QCOMPARE(f.number, uint64_t{2});
    QVERIFY(!f.full);
  }

  // One STEP: the delta holds that rank's row only, and (rank 0's) the new loss point from the
  // previous count on.
  void deltaHoldsOnlyWhatChanged() {
    Scenario sc;
    sc.hellos(8, 2, 2, 2);
    for (int64_t n = 1; n <= 3; ++n) sc.step(n);
    DashboardInfo info;
    FrameBuilder b(kEveryTick);
    const double now = kT0 + 4;
    Viewer v;
    v.take_full(b.build(input(sc.model, info, now), true));
    const size_t before = v.state["loss"]["points"].size();
    QCOMPARE(before, size_t{3});

    sc.add(0, kT0 + 3.95, make_step(4, 0.125, 0.9));
    FrameBuilder::Frame f = b.build(input(sc.model, info, now), false);
    QVERIFY(f.delta);
    json d = parse(f.delta);
    QVERIFY(!d.is_discarded());
    QCOMPARE(d["type"], json("delta"));
    QCOMPARE(d["frame"], json(2));
    QVERIFY(d["ranks"].is_object());
    QCOMPARE(d["ranks"].size(), size_t{1});
    QVERIFY(d["ranks"].contains("0"));
    QCOMPARE(d["ranks"]["0"]["step"], json(4));
    QCOMPARE(d["loss"]["from"].get<size_t>(), before);
    QCOMPARE(d["loss"]["points"], json::parse("[[4,0.125]]"));
    QCOMPARE(d["job"]["step"], json(4));  // the newest step moved
    for (const char* unchanged : {"evals", "comm", "heat", "replay"})
      QVERIFY2(!d.contains(unchanged), unchanged);
    QCOMPARE(apply_frame(v.state, d), std::string());

    // Another rank's STEP: its row only, no loss (the chart is rank 0's).
    sc.add(5, kT0 + 3.96, make_step(4, 0.25, 0.9));
    f = b.build(input(sc.model, info, now), false);
    d = parse(f.delta);
    QCOMPARE(d["frame"], json(3));
    QCOMPARE(d["ranks"].size(), size_t{1});
    QVERIFY(d["ranks"].contains("5"));
    QVERIFY(!d.contains("loss"));
    QVERIFY(!d["job"].is_null());  // events counted
    QCOMPARE(apply_frame(v.state, d), std::string());

    // A failure: the row and the run's state change.
    sc.add(2, kT0 + 3.97, tl::JobStateEvent{tl::JobState::failed, "boom"});
    d = parse(b.build(input(sc.model, info, now), false).delta);
    QCOMPARE(d["ranks"].size(), size_t{1});
    QCOMPARE(d["ranks"]["2"]["reason"], json("boom"));
    QCOMPARE(d["job"]["state"], json("failed"));
    QCOMPARE(apply_frame(v.state, d), std::string());

    // An evaluation appends to evals from the previous count.
    sc.add(0, kT0 + 3.98, tl::EvalEvent{4, 0.75, 0.5, 64});
    d = parse(b.build(input(sc.model, info, now), false).delta);
    QCOMPARE(d["evals"]["from"], json(0));
    QCOMPARE(d["evals"]["points"], json::parse("[[4,0.75,0.5,64]]"));
    QCOMPARE(apply_frame(v.state, d), std::string());
    sc.add(0, kT0 + 3.99, tl::EvalEvent{5, 0.625, 0.625, 64});
    d = parse(b.build(input(sc.model, info, now), false).delta);
    QCOMPARE(d["evals"]["from"], json(1));
    QCOMPARE(d["evals"]["points"].size(), size_t{1});
    QCOMPARE(apply_frame(v.state, d), std::string());

    const std::string diff = diff_from_full(v.state, sc.model, info, now);
    QVERIFY2(diff.empty(), diff.c_str());
  }

  // The heat map: a step's collectives make a new column; a column still filling (some ranks
  // reported) is sent again as it fills; past 64 steps the window slides and old columns drop.
  void heatColumns() {
    HeatRun run(2);
    auto& [sc, info, b, now, v] = run;
    QCOMPARE(v.state["heat"]["cols"].size(), size_t{1});

    // Step 2's collectives, rank by rank: column 2 appears, then fills.
    for (int r = 0; r < 4; ++r) {
      const double t = kT0 + 2;
      const double w = r == 2 ? 0.0 : 0.25;
      sc.add(r, t + 0.3 + w, collective("all_reduce", "dp[0]", t + 0.3, 0.05 + w, w, 2));
      const FrameBuilder::Frame f = b.build(input(sc.model, info, now), false);
      const json d = parse(f.delta);
      QVERIFY(d.contains("heat"));
      QCOMPARE(d["heat"]["first"], json(1));
      QCOMPARE(d["heat"]["last"], json(2));
      QCOMPARE(d["heat"]["cols"].size(), size_t{1});  // column 1 is unchanged
      const json& col = d["heat"]["cols"][0];
      QCOMPARE(col[0], json(2));
      for (int q = 0; q < 4; ++q) {
        const HeatCell& want = sc.heat[{q, 2}];
        QVERIFY(near(col[1][q].get<double>(), want.comm, 1e-3));
        QVERIFY(near(col[2][q].get<double>(), want.wait, 1e-3));
        QCOMPARE(col[1][q].get<double>() > 0, q <= r);
      }
      v.take(f);
    }
    for (int r = 0; r < 4; ++r) sc.add(r, kT0 + 2.9, make_step(2, 1, 0.9));
    v.take(b.build(input(sc.model, info, now), false));

    // 70 more steps: one new column each; the window keeps the newest 64.
    for (int64_t n = 3; n <= 72; ++n) {
      sc.step(n, n % 4 == 0 ? 1 : -1);
      const FrameBuilder::Frame f = b.build(input(sc.model, info, now), false);
      const json d = parse(f.delta);
      QVERIFY(d.contains("heat"));
      QCOMPARE(d["heat"]["last"].get<int64_t>(), n);
      QCOMPARE(d["heat"]["first"].get<int64_t>(), std::max<int64_t>(1, n - kHeatSteps + 1));
      std::set<int64_t> steps;
      for (const json& c : d["heat"]["cols"]) steps.insert(c[0].get<int64_t>());
      QVERIFY2(steps == std::set<int64_t>{n}, d["heat"].dump().substr(0, 300).c_str());
      v.take(f);
    }
    QVERIFY2(v.error.empty(), v.error.c_str());
    QCOMPARE(v.state["heat"]["cols"].size(), size_t(kHeatSteps));
    QCOMPARE(v.state["heat"]["cols"][0][0].get<int64_t>(), 72 - kHeatSteps + 1);
    for (const json& col : v.state["heat"]["cols"]) {
      const int64_t step = col[0];
      for (int r = 0; r < 4; ++r) {
        const HeatCell& want = sc.heat[{r, step}];
        QVERIFY(near(col[1][r].get<double>(), want.comm, 1e-3));
        QVERIFY(near(col[2][r].get<double>(), want.wait, 1e-3));
        QVERIFY(near(col[3][r].get<double>(), want.compute, 1e-3));
      }
    }
    const std::string diff = diff_from_full(v.state, sc.model, info, now);
    QVERIFY2(diff.empty(), diff.c_str());
  }

  // The last rank to finish a step often sends its collective and its STEP between two builds
  // (steps faster than a frame): the column must still show that rank's seconds (in a straggler's
  // step it is the rank that matters).
  void heatColumnCompletedBetweenBuilds() {
    HeatRun run;
    auto& [sc, info, b, now, v] = run;
    const double t = kT0 + 2;
    // Ranks 0..2: step 2's all-reduce (waiting for rank 3) and STEP 2; a frame.
    for (int r = 0; r < 3; ++r) {
      sc.add(r, t + 0.5, collective("all_reduce", "dp[0]", t + 0.1, 0.4, 0.35, 3));
      sc.add(r, t + 0.6, make_step(2, 1, 0.6));
    }
    v.take(b.build(input(sc.model, info, now), false));
    // Rank 3, late: its all-reduce and its STEP 2 before the next frame.
    sc.add(3, t + 0.5, collective("all_reduce", "dp[0]", t + 0.45, 0.05, 0.0, 3));
    sc.add(3, t + 0.6, make_step(2, 1, 0.6));
    const FrameBuilder::Frame f = b.build(input(sc.model, info, now), false);
    v.take(f);
    QVERIFY2(v.error.empty(), v.error.c_str());
    const json& cols = v.state["heat"]["cols"];
    QCOMPARE(cols.size(), size_t{2});
    QCOMPARE(cols[1][0], json(2));
    QVERIFY2(
        near(cols[1][1][3].get<double>(), 0.05, 1e-3),
        qPrintable(QString("rank 3's comm seconds in step 2: %1 (the frame's heat: %2)")
                       .arg(cols[1][1][3].get<double>())
                       .arg(QString::fromStdString(parse(f.delta).value("heat", json()).dump()))));
    const std::string diff = diff_from_full(v.state, sc.model, info, now);
    QVERIFY2(diff.empty(), diff.c_str());
  }

  // Quotes, backslashes, control characters and "</script>" in host names, failure reasons, the
  // job's name and collective names: the frame parses, each string reads back as it was, and no
  // raw '<' is in the text.
  void stringsEscaped() {
    const std::string nasty =
        std::string("a\"b\\c</script><script>alert(1)</script>\x01\x02\x1f\t\r\n\b\f end ") +
        "\xc3\xa9\xe2\x82\xac";  // é €: UTF-8 passes
    RunModel m;
    EventFeeder feed(m);
    for (int r = 0; r < 2; ++r) {
      Hello h = hello(r, 2, 1, 1, 2, nasty + std::to_string(r));
      h.job_id = nasty;
      m.add(Message(h));
    }
    feed.add(0, kT0, make_step(1, 1, 1));
    feed.add(0, kT0 + 0.1, collective(nasty, "dp[0]" + nasty, kT0, 0.05, 0, 0));
    feed.add(1, kT0 + 0.2, tl::JobStateEvent{tl::JobState::failed, nasty + "reason"});
    DashboardInfo info;
    info.job_name = "name " + nasty;
    FrameBuilder b(kEveryTick);
    const FrameBuilder::Frame f = b.build(input(m, info, kT0 + 1), true);
    for (const std::string* text : {f.full.get()}) {
      QVERIFY(text);
      QVERIFY(valid_utf8(*text));
      QVERIFY2(text->find('<') == std::string::npos, text->c_str());
      for (const char c : *text)
        QVERIFY2(static_cast<unsigned char>(c) >= 0x20, "a raw control character");
    }
    const json j = parse(f.full);
    QVERIFY2(!j.is_discarded(), f.full->c_str());
    // What a peer sent is kept printable by the run model (control characters shown as '?', see
    // engine/core/display_text.h): the frame carries that, escaped. Job name: the server's own, as
    // is.
    const auto shown = [](std::string t) {
      for (char& c : t)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
      return t;
    };
    QCOMPARE(j["job"]["id"].get<std::string>(), shown(nasty));
    QCOMPARE(j["job"]["name"].get<std::string>(), "name " + nasty);
    QCOMPARE(j["ranks"][0]["host"].get<std::string>(), shown(nasty) + "0");
    QCOMPARE(j["ranks"][1]["host"].get<std::string>(), shown(nasty) + "1");
    QCOMPARE(j["ranks"][1]["reason"].get<std::string>(), shown(nasty) + "reason");
    QCOMPARE(j["comm"][0][0].get<std::string>(), shown(nasty));
    QCOMPARE(j["comm"][0][1].get<std::string>(), "dp[0]" + shown(nasty));

    // The same in a delta, and in /api/run's document.
    feed.add(0, kT0 + 0.3, tl::JobStateEvent{tl::JobState::failed, "</script>\"\\\x07"});
    const FrameBuilder::Frame g = b.build(input(m, info, kT0 + 1), false);
    QVERIFY(g.delta);
    QVERIFY(g.delta->find('<') == std::string::npos);
    const json d = parse(g.delta);
    QVERIFY(!d.is_discarded());
    QCOMPARE(d["ranks"]["0"]["reason"].get<std::string>(), shown("</script>\"\\\x07"));
    const std::string api = full_state(input(m, info, kT0 + 1));
    QVERIFY(api.find('<') == std::string::npos);
    QVERIFY(!json::parse(api, nullptr, false).is_discarded());

    // The helpers the server shares.
    QCOMPARE(json::parse(json_string(nasty)).get<std::string>(), nasty);
    QVERIFY(json_string(nasty).find('<') == std::string::npos);
    QCOMPARE(json_number(std::nan("")), std::string("null"));
    QCOMPARE(json::parse(json_number(0.5)).get<double>(), 0.5);
  }

  // A WebSocket text message must be valid UTF-8 (RFC 6455 8.1: a browser fails the connection on
  // one that is not), so bytes that are not UTF-8 in an event's strings (a host name in Latin-1,
  // a failure reason cut inside a character) must not reach a frame as they are.
  void framesAreValidUtf8() {
    const std::string latin1 =
        "n\xf6"
        "de";                                          // "node" with o-umlaut in Latin-1
    const std::string cut = "out of memory \xe2\x82";  // a 3-byte character cut after 2
    RunModel m;
    EventFeeder feed(m);
    m.add(Message(hello(0, 2, 1, 1, 2, latin1)));
    m.add(Message(hello(1, 2, 1, 1, 2)));
    feed.add(1, kT0, tl::JobStateEvent{tl::JobState::failed, cut});
    DashboardInfo info;
    const std::string full = full_state(input(m, info, kT0 + 1));
    QVERIFY2(valid_utf8(full), full.c_str());
    // The bad bytes become U+FFFD; the rest of each string, and of the frame, is intact.
    const json j = json::parse(full, nullptr, false);
    QVERIFY(!j.is_discarded());
    QCOMPARE(j["ranks"].size(), size_t{2});
    QCOMPARE(j["ranks"][0]["host"].get<std::string>(), std::string("n\xef\xbf\xbd"
                                                                   "de"));
    QCOMPARE(j["ranks"][1]["reason"].get<std::string>(),
             std::string("out of memory \xef\xbf\xbd\xef\xbf\xbd"));
  }

  // With the default builder the timeline goes to delta viewers at most once per
  // kTimelineSeconds: a step's new spans right after a sent timeline wait; a full frame has them.
  void timelineIsThrottled() {
    RunModel m;
    EventFeeder feed(m);
    m.add(Message(hello(0, 1, 1, 1, 1)));
    m.add(Message(hello(1, 2, 1, 1, 2)));
    DashboardInfo info;
    FrameBuilder b;  // default: kTimelineSeconds
    feed.add(0, kT0 + 0.5, make_step(1, 1.0, 0.5));
    b.build(input(m, info, kT0 + 1), false);
    tl::PhaseEvent forward;
    forward.phase = tl::Phase::forward;
    forward.start = kT0 + 0.6;
    forward.end = kT0 + 0.9;
    feed.add(0, kT0 + 1.0, forward);
    feed.add(0, kT0 + 1.0, make_step(2, 0.9, 0.5));
    const FrameBuilder::Frame f = b.build(input(m, info, kT0 + 1.1), true);
    QVERIFY(f.delta && f.full);
    const json d = json::parse(*f.delta);
    QVERIFY2(!d.contains("timeline"), f.delta->c_str());
    const json full = json::parse(*f.full);
    QVERIFY(full.contains("timeline"));
    QVERIFY2(full["timeline"].dump().find("forward") != std::string::npos, f.full->c_str());
  }

  // A long run's loss series is thinned in a full frame (at most kMaxLossPoints and the newest),
  // and a burst of more points than that between two builds comes again whole, from 0.
  void longLossSeriesIsThinned() {
    constexpr int64_t kSteps = 10000;
    RunModel m;
    EventFeeder feed(m);
    m.add(Message(hello(0, 1, 1, 1, 1)));
    for (int64_t n = 1; n <= 10; ++n) feed.add(0, kT0 + 0.01 * n, make_step(n, 1.0 / n, 0.01));
    DashboardInfo info;
    FrameBuilder b(kEveryTick);
    b.build(input(m, info, kT0 + 1), false);
    for (int64_t n = 11; n <= kSteps; ++n) feed.add(0, kT0 + 0.01 * n, make_step(n, 1.0 / n, 0.01));
    const FrameBuilder::Frame f = b.build(input(m, info, kT0 + 200), true);
    for (const auto& text : {f.full, f.delta}) {
      QVERIFY(text);
      const json j = json::parse(*text);
      const json& pts = j["loss"]["points"];
      QCOMPARE(j["loss"]["from"].get<int64_t>(), int64_t{0});
      QVERIFY2(pts.size() <= kMaxLossPoints + 1, std::to_string(pts.size()).c_str());
      QVERIFY(pts.size() >= kMaxLossPoints / 2);
      QCOMPARE(pts.front()[0].get<int64_t>(), int64_t{1});
      QCOMPARE(pts.back()[0].get<int64_t>(), kSteps);
      QCOMPARE(pts.back()[1].get<double>(), 1.0 / kSteps);
      for (size_t i = 1; i < pts.size(); ++i)
        QVERIFY(pts[i][0].get<int64_t>() > pts[i - 1][0].get<int64_t>());
    }
  }

  // A 1,024-rank run: the full frame parses and has a row per rank.
  void thousandRanks() {
    constexpr int kWorld = 1024;
    RunModel m;
    EventFeeder feed(m);
    for (int r = 0; r < kWorld; ++r) m.add(Message(hello(r, kWorld, 4, 4, 64)));
    for (int n = 1; n <= 3; ++n)
      for (int r = 0; r < kWorld; ++r) {
        feed.add(r, kT0 + n - 0.5,
                 collective("all_reduce", "dp[" + std::to_string(r / 64) + "]", kT0 + n - 0.6, 0.1,
                            0.05, (r / 64) * 64));
        feed.add(r, kT0 + n, make_step(n, 1.0 / (n + r), 0.5));
      }
    DashboardInfo info;
    FrameBuilder b(kEveryTick);
    const FrameBuilder::Frame f = b.build(input(m, info, kT0 + 4), true);
    const json j = parse(f.full);
    QVERIFY(!j.is_discarded());
    QCOMPARE(j["job"]["world"], json(kWorld));
    QCOMPARE(j["ranks"].size(), size_t{kWorld});
    for (int r = 0; r < kWorld; ++r) {
      const json& row = j["ranks"][static_cast<size_t>(r)];
      QVERIFY(row.is_object());
      QCOMPARE(row["r"], json(r));
      QCOMPARE(row["step"], json(3));
    }
    for (const json& col : j["heat"]["cols"]) {
      QCOMPARE(col[1].size(), size_t{kWorld});
      QCOMPARE(col[3].size(), size_t{kWorld});
    }
    QVERIFY(j["timeline"]["lanes"].size() <= size_t(kTimelineLanes));
    qInfo("1024-rank full frame: %zu bytes", f.full->size());

    // Every row changes: the delta carries all 1,024, and merges to the full state.
    Viewer v;
    v.take_full(f);
    for (int r = 0; r < kWorld; ++r) feed.add(r, kT0 + 4, make_step(4, 0.5, 0.5));
    const FrameBuilder::Frame g = b.build(input(m, info, kT0 + 4), false);
    const json d = parse(g.delta);
    QCOMPARE(d["ranks"].size(), size_t{kWorld});
    v.take(g);
    QVERIFY2(v.error.empty(), v.error.c_str());
    const std::string diff = diff_from_full(v.state, m, info, kT0 + 4);
    QVERIFY2(diff.empty(), diff.c_str());
  }

  // A long run of random events of every kind, ranks joining late, a viewer that joins midway
  // from a full frame: every delta merged gives the whole state, at every frame.
  void mergedDeltasEqualFullState() {
    std::mt19937 rng(20261126);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    RunModel m;
    EventFeeder feed(m);
    constexpr int kWorld = 12;
    DashboardInfo info;
    FrameBuilder b(kEveryTick);
    Viewer early, late;
    std::map<int, int64_t> steps;
    std::set<int> joined;
    double t = kT0;
    uint64_t deltas = 0;
    for (int round = 0; round < 160; ++round) {
      // Sometimes nothing happens between two builds.
      const int batch = u(rng) < 0.1 ? 0 : 1 + static_cast<int>(u(rng) * 12);
      for (int i = 0; i < batch; ++i) {
        const int r = static_cast<int>(u(rng) * kWorld);
        t += 0.01;
        if (!joined.count(r)) {
          // Ranks 8.. join late (the world grows when their HELLO says so).
          m.add(Message(hello(r, r >= 8 ? kWorld : 8, 1, 2, r >= 8 ? 6 : 4)));
          joined.insert(r);
        }
        const double k = u(rng);
        if (k < 0.35) {
          feed.add(r, t, make_step(++steps[r], 3.0 * u(rng), 0.1 + u(rng)));
        } else if (k < 0.55) {
          const std::string g = u(rng) < 0.5 ? "dp[0]" : "tp[" + std::to_string(r % 2) + "]";
          feed.add(r, t,
                   collective(u(rng) < 0.8 ? "all_reduce" : "all_gather", g, t - 0.05,
                              0.05 * u(rng), u(rng) < 0.2 ? -1.0 : 0.01 * u(rng),
                              static_cast<int>(u(rng) * 8), 1024, 5 * u(rng), u(rng) > 0.05));
        } else if (k < 0.75) {
          const tl::Phase p = u(rng) < 0.4   ? tl::Phase::forward
                              : u(rng) < 0.7 ? tl::Phase::backward
                                             : tl::Phase::optimizer;
          feed.add(r, t, tl::PhaseEvent{0, static_cast<int>(u(rng) * 4), p, t - 0.02, t});
        } else if (k < 0.85) {
          tl::MemoryEvent mem;
          for (auto& c : mem.current) c = static_cast<int64_t>(u(rng) * 1e9);
          mem.peak = mem.current;
          feed.add(r, t, mem);
        } else if (k < 0.9) {
          feed.add(r, t, tl::EvalEvent{steps[r], u(rng), u(rng), 100});
        } else if (k < 0.93) {
          feed.add(r, t,
                   tl::JobStateEvent{u(rng) < 0.5 ? tl::JobState::failed : tl::JobState::finished,
                                     "reason " + std::to_string(round)});
        } else {
          feed.add(r, t, tl::HeartbeatEvent{});
        }
      }
      const double now = t + (u(rng) < 0.1 ? 6.0 : 0.5);  // now and then a rank is silent
      const bool want_full = round == 0 || round == 80;
      const FrameBuilder::Frame f = b.build(input(m, info, now), want_full);
      if (round == 0) early.take_full(f);
      if (round > 0) early.take(f);
      if (round == 80) late.take_full(f);
      if (round > 80) late.take(f);
      if (f.delta) ++deltas;
      if (round % 10 == 0 || round == 159) {
        const json full = json::parse(full_state(input(m, info, now)));
        std::string diff = compare_state(early.state, full);
        QVERIFY2(diff.empty(), qPrintable(QString("round %1: %2").arg(round).arg(diff.c_str())));
        if (round >= 80) {
          diff = compare_state(late.state, full);
          QVERIFY2(diff.empty(),
                   qPrintable(QString("late viewer, round %1: %2").arg(round).arg(diff.c_str())));
        }
      }
    }
    QVERIFY2(early.error.empty(), early.error.c_str());
    QVERIFY2(late.error.empty(), late.error.c_str());
    QVERIFY(deltas > 100);
    QCOMPARE(b.number(), deltas + 1);
    QCOMPARE(early.state["ranks"].size(), size_t{kWorld});
  }
};

QTEST_GUILESS_MAIN(TestDashboardFrames)
#include "tst_dashboard_frames.moc"
