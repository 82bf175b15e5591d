// One step phase by phase (net/step_replay.h) from the telemetry of real threads runs on 4 ranks,
// against the strategies' definitions written here, not taken from the code under test (ZeRO
// paper section 5; PyTorch FSDP's gather-compute-free per unit):
//   - the units tile the model (buckets of DDP/ZeRO in order; FSDP's units are its blocks);
//   - ZeRO-2 and FSDP reduce-scatter the gradients of every unit once a step: each rank sends the
//     whole unit and receives its chunk r, the unit padded to a multiple of 4 cut in 4 equal
//     chunks; the 4 ranks' chunks partition the unit;
//   - DDP and ZeRO-1 all-reduce every unit (send and receive it whole);
//   - ZeRO-1/2 all-gather every unit's parameters after the update (send chunk r, receive all),
//     FSDP gathers every block at least once before it computes; DDP gathers nothing;
//   - the update touches chunk r of every unit (DDP: everything);
//   - collectives of gradients start after the backward began, ZeRO's all-gathers after the
//     update began.
// And with tensor and pipeline parallelism: the dp groups' collectives are frames of 2 ranks whose
// received slices partition the unit, tp's activations are counted inside the forward, and the
// pipeline has a forward per stage and micro-batch.
#include <QtTest>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <mutex>

#include "engine/run/rank_runner.h"
#include "net/step_replay.h"
#include "net/web/step_json.h"
#include "tests/parallel/parallel_test_util.h"

using namespace shardlab;
using namespace shardlab::ptest;
using net::ReplayFrame;
using net::ReplayKind;
using net::ReplayLane;
using net::ReplayRole;
namespace tel = shardlab::telemetry;

namespace {

using Ranges = std::vector<tel::LayoutRange>;

// Every event of every rank, in each rank's order.
class Collect : public tel::TelemetrySink {
 public:
  void publish(tel::Event e) noexcept override {
    std::lock_guard lock(mu_);
    events.push_back(std::move(e));
  }
  std::vector<tel::Event> events;

 private:
  std::mutex mu_;
};

net::RunModel model_of(const std::vector<tel::Event>& events) {
  net::RunModel m;
  for (const tel::Event& e : events) m.add(net::Message(e));
  return m;
}

std::vector<tel::Event> run(JobSpec job) {
  job.train.steps = 3;
  job.train.eval_every = 0;
  Collect sink;
  RankRunOptions options;
  options.telemetry = [&](int) -> tel::TelemetrySink* { return &sink; };
  run_threads_job(job, data_of(job), options);
  return sink.events;
}

QString show(const Ranges& r) {
  QStringList parts;
  for (const auto& x : r) parts << QString("[%1, %2)").arg(x.begin).arg(x.end);
  return parts.join(' ');
}

const Ranges* touch(const net::ReplayRank& r, ReplayLane lane, ReplayRole role) {
  for (const auto& t : r.touches)
    if (t.lane == lane && t.role == role) return &t.ranges;
  return nullptr;
}

// Chunk r of 4 of the contiguous unit [b, e): the unit padded to a multiple of 4, cut in 4.
Ranges chunk_of(const tel::LayoutRange& unit, int r, int parts) {
  const int64_t size = unit.end - unit.begin;
  const int64_t chunk = (size + parts - 1) / parts;
  const int64_t b = std::min(unit.end, unit.begin + r * chunk);
  const int64_t e = std::min(unit.end, unit.begin + (r + 1) * chunk);
  return b < e ? Ranges{{b, e}} : Ranges{};
}

const tel::LayoutEvent& layout_of(const net::RunModel& m, int rank) {
  return *m.ranks().at(rank).layout;
}

// The frames of `kind` (collectives: of `op` that moved model state).
std::vector<const ReplayFrame*> frames_of(const net::StepReplay& s, ReplayKind kind,
                                          const std::string& op = {}) {
  std::vector<const ReplayFrame*> out;
  for (const ReplayFrame& f : s.frames)
    if (f.kind == kind && (op.empty() || f.op == op) &&
        (kind != ReplayKind::collective || f.array != tel::CollectiveArray::unknown))
      out.push_back(&f);
  return out;
}

}  // namespace

class TestStepReplay : public QObject {
  Q_OBJECT

 private slots:
  // On cpu and on test devices (each rank its own; collectives staged through the host): the same
  // replay.
  void oneDimensionalStrategies_data() {
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<QString>("device");
    for (const char* d : {"cpu", "test"})
      for (const char* s : {"ddp", "zero1", "zero2", "fsdp"})
        QTest::addRow("%s/%s", s, d) << QString(s) << QString(d);
  }

  void oneDimensionalStrategies() {
    QFETCH(QString, strategy);
    QFETCH(QString, device);
    const std::string s = strategy.toStdString();
    JobSpec job = mlp_job(s, 4, "adam");
    job.device = device.toStdString();
    job.parallel.bucket_mb = 0.015;  // 3,932 elements: the MLP's 10,343 in 3 buckets
    const net::RunModel model = model_of(run(job));
    const net::StepReplay replay = net::replay_step(model);
    QCOMPARE(replay.step, int64_t{3});
    QVERIFY(replay.note.empty());
    QVERIFY(std::find(replay.steps.begin(), replay.steps.end(), 2) != replay.steps.end());

    // The units tile the model: contiguous, in order (FSDP: the MLP's 2 blocks).
    const tel::LayoutEvent& l0 = layout_of(model, 0);
    int64_t full = 0;
    for (const auto& t : l0.tensors) full = std::max(full, t.offset + t.size);
    int64_t at = 0;
    for (const Ranges& u : l0.units) {
      QCOMPARE(int(u.size()), 1);
      QCOMPARE(u[0].begin, at);
      at = u[0].end;
    }
    QCOMPARE(at, full);
    const int units = static_cast<int>(l0.units.size());
    QCOMPARE(units, s == "fsdp" ? 2 : 3);
    for (int r = 1; r < 4; ++r) QVERIFY(layout_of(model, r).units == l0.units);

    // One forward, backward and update, on all 4 ranks.
    for (ReplayKind k : {ReplayKind::forward, ReplayKind::backward, ReplayKind::update}) {
      const auto fs = frames_of(replay, k);
      QCOMPARE(int(fs.size()), 1);
      QCOMPARE(int(fs[0]->ranks.size()), 4);
    }
    const double backward = frames_of(replay, ReplayKind::backward)[0]->start;
    const double update = frames_of(replay, ReplayKind::update)[0]->start;

    // The gradients' collectives: one per unit, all 4 ranks, after the backward began.
    const bool scatter = s == "zero2" || s == "fsdp";
    const auto grads =
        frames_of(replay, ReplayKind::collective, scatter ? "reduce_scatter" : "all_reduce");
    QCOMPARE(int(grads.size()), units);
    std::vector<int> seen(static_cast<size_t>(units), 0);
    for (const ReplayFrame* f : grads) {
      QCOMPARE(f->array, tel::CollectiveArray::grads);
      QVERIFY(f->unit >= 0 && f->unit < units);
      ++seen[static_cast<size_t>(f->unit)];
      QVERIFY(f->start >= backward);
      QCOMPARE(int(f->ranks.size()), 4);
      const Ranges& unit = l0.units[static_cast<size_t>(f->unit)];
      for (const net::ReplayRank& r : f->ranks) {
        const Ranges* sent = touch(r, ReplayLane::grads, ReplayRole::send);
        const Ranges* got = touch(r, ReplayLane::grads, ReplayRole::receive);
        QVERIFY(sent && got);
        QCOMPARE(show(*sent), show(unit));
        QCOMPARE(show(*got), show(scatter ? chunk_of(unit[0], r.rank, 4) : unit));
      }
    }
    QVERIFY(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));

    // The parameters' all-gathers.
    const auto gathers = frames_of(replay, ReplayKind::collective, "all_gather");
    if (s == "ddp") QVERIFY(gathers.empty());
    std::fill(seen.begin(), seen.end(), 0);
    for (const ReplayFrame* f : gathers) {
      QCOMPARE(f->array, tel::CollectiveArray::params);
      ++seen[static_cast<size_t>(f->unit)];
      if (s != "fsdp") QVERIFY(f->start >= update);
      const Ranges& unit = l0.units[static_cast<size_t>(f->unit)];
      for (const net::ReplayRank& r : f->ranks) {
        const Ranges* sent = touch(r, ReplayLane::params, ReplayRole::send);
        const Ranges* got = touch(r, ReplayLane::params, ReplayRole::receive);
        QVERIFY(sent && got);
        QCOMPARE(show(*sent), show(chunk_of(unit[0], r.rank, 4)));
        QCOMPARE(show(*got), show(unit));
      }
    }
    if (s != "ddp")
      for (int n : seen) QVERIFY2(s == "fsdp" ? n >= 1 : n == 1, qPrintable(QString::number(n)));

    // The update: chunk r of every unit (DDP: everything), in params and optimizer state.
    for (const net::ReplayRank& r : frames_of(replay, ReplayKind::update)[0]->ranks) {
      Ranges want;
      if (s == "ddp")
        want = {{0, full}};
      else
        for (const Ranges& u : l0.units)
          for (const auto& c : chunk_of(u[0], r.rank, 4)) {
            if (!want.empty() && want.back().end == c.begin)
              want.back().end = c.end;
            else
              want.push_back(c);
          }
      QCOMPARE(show(*touch(r, ReplayLane::optimizer_state, ReplayRole::write)), show(want));
      QCOMPARE(show(*touch(r, ReplayLane::params, ReplayRole::write)), show(want));
    }
    // The forward reads the whole model on every rank (FSDP too: gathered for the time).
    for (const net::ReplayRank& r : frames_of(replay, ReplayKind::forward)[0]->ranks)
      QCOMPARE(show(*touch(r, ReplayLane::params, ReplayRole::read)), show({{0, full}}));

    // Frames are in the order they started; the page gets the same frames.
    for (size_t i = 1; i < replay.frames.size(); ++i)
      QVERIFY(replay.frames[i - 1].start <= replay.frames[i].start);
    const auto json = nlohmann::json::parse(net::step_section(model));
    QCOMPARE(json["step"].get<int>(), 3);
    QCOMPARE(json["frames"].size(), replay.frames.size());
    QCOMPARE(json["strategy"].get<std::string>(), s);
  }

  // A step that cannot be replayed says why; events of an older worker (no array, no unit, no
  // units) give frames that touch no ranges of collectives.
  void unknownStepsAndOlderWorkers() {
    JobSpec job = mlp_job("zero2", 4, "adam");
    job.parallel.bucket_mb = 0.015;
    std::vector<tel::Event> events = run(job);
    const net::RunModel model = model_of(events);
    const net::StepReplay none = net::replay_step(model, 99);
    QCOMPARE(none.step, int64_t{0});
    QVERIFY2(none.note.find("step 99") != std::string::npos, none.note.c_str());
    QVERIFY(none.frames.empty());
    QCOMPARE(net::replay_step(net::RunModel{}).step, int64_t{0});

    for (tel::Event& e : events) {
      if (auto* c = std::get_if<tel::CollectiveEvent>(&e.payload)) {
        c->array = tel::CollectiveArray::unknown;
        c->unit = -1;
      }
      if (auto* l = std::get_if<tel::LayoutEvent>(&e.payload)) l->units.clear();
    }
    const net::StepReplay old = net::replay_step(model_of(events));
    QCOMPARE(old.step, int64_t{3});
    int collectives = 0;
    for (const ReplayFrame& f : old.frames)
      if (f.kind == ReplayKind::collective) {
        ++collectives;
        QCOMPARE(f.array, tel::CollectiveArray::unknown);
        for (const auto& r : f.ranks) QVERIFY(r.touches.empty());
      }
    QVERIFY(collectives > 0);
  }

  // The newest complete step is taken when its last rank reports it: communication after the run
  // (an evaluation's, thousands of spans) that pushes its spans out of the timeline's ring does
  // not lose it, while the timeline alone can no longer replay it.
  void newestStepOutlivesTheTimeline() {
    JobSpec job = mlp_job("zero2", 4, "adam");
    std::vector<tel::Event> events = run(job);
    const net::StepReplay before = net::replay_step(model_of(events));
    QCOMPARE(before.step, int64_t{3});
    double t = 0;
    for (const tel::Event& e : events) t = std::max(t, e.time);
    for (int r = 0; r < 4; ++r)
      for (size_t i = 0; i < net::Timeline::kMaxSpans + 10; ++i) {
        tel::CollectiveEvent c;
        c.op = "all_reduce";
        c.group = "world";
        c.seq = 100000 + i;
        c.start = t + 1 + 1e-6 * static_cast<double>(i);
        c.duration = 1e-7;
        events.push_back({r, 0, c.start, c});
      }
    const net::RunModel model = model_of(events);
    QCOMPARE(net::replay_from_timeline(model, 3).step, int64_t{0});
    const net::StepReplay after = net::replay_step(model);
    QCOMPARE(after.step, int64_t{3});
    QCOMPARE(after.frames.size(), before.frames.size());
    for (size_t i = 0; i < after.frames.size(); ++i)
      QCOMPARE(after.frames[i].title, before.frames[i].title);
  }

  // ZeRO-2 on a 2 x 2 tp x dp GPT and ZeRO-1 on a 2 x 2 pp x dp GPT, on cpu and on test devices.
  void tensorAndPipelineLayouts_data() {
    QTest::addColumn<int>("tp");
    QTest::addColumn<int>("pp");
    QTest::addColumn<QString>("device");
    for (const char* d : {"cpu", "test"}) {
      QTest::addRow("zero2 tp2 x dp2/%s", d) << 2 << 1 << QString(d);
      QTest::addRow("zero1 pp2 x dp2/%s", d) << 1 << 2 << QString(d);
    }
  }

  void tensorAndPipelineLayouts() {
    QFETCH(int, tp);
    QFETCH(int, pp);
    QFETCH(QString, device);
    JobSpec job = gpt_job(tp > 1 ? "zero2" : "zero1", 4, corpus_vocab());
    job.device = device.toStdString();
    set_grid(job, {.pp = pp, .tp = tp, .dp = 2, .micro_batches = pp > 1 ? 2 : 1});
    const net::RunModel model = model_of(run(job));
    const net::StepReplay replay = net::replay_step(model);
    QCOMPARE(replay.step, int64_t{3});
    const auto forwards = frames_of(replay, ReplayKind::forward);
    if (pp > 1) {
      // A forward per stage and micro-batch, each on the stage's 2 data-parallel ranks.
      QCOMPARE(int(forwards.size()), 4);
      for (const ReplayFrame* f : forwards) QCOMPARE(int(f->ranks.size()), 2);
    } else {
      QCOMPARE(int(forwards.size()), 1);
      QVERIFY2(forwards[0]->inside > 0, "tp's activation all-reduces are counted in the forward");
    }
    const auto grads =
        frames_of(replay, ReplayKind::collective, tp > 1 ? "reduce_scatter" : "all_reduce");
    QVERIFY(!grads.empty());
    for (const ReplayFrame* f : grads) {
      QVERIFY2(f->group.starts_with("dp["), f->group.c_str());
      QCOMPARE(int(f->ranks.size()), 2);
      // The two dp ranks hold the same slice of the model and the same unit; what they receive
      // partitions it (tp x dp ZeRO-2) or is all of it (ZeRO-1's all-reduce).
      const tel::LayoutEvent& a = layout_of(model, f->ranks[0].rank);
      const tel::LayoutEvent& b = layout_of(model, f->ranks[1].rank);
      QVERIFY(a.units == b.units);
      const Ranges& unit = a.units[static_cast<size_t>(f->unit)];
      Ranges both;
      for (const auto& r : f->ranks) {
        QCOMPARE(show(*touch(r, ReplayLane::grads, ReplayRole::send)), show(unit));
        const Ranges& got = *touch(r, ReplayLane::grads, ReplayRole::receive);
        both.insert(both.end(), got.begin(), got.end());
      }
      std::sort(both.begin(), both.end(), [](auto& x, auto& y) { return x.begin < y.begin; });
      int64_t unit_elements = 0, both_elements = 0;
      for (const auto& x : unit) unit_elements += x.end - x.begin;
      for (const auto& x : both) both_elements += x.end - x.begin;
      QCOMPARE(both_elements, tp > 1 ? unit_elements : 2 * unit_elements);
      if (tp > 1)
        for (size_t i = 1; i < both.size(); ++i) QVERIFY(both[i - 1].end <= both[i].begin);
    }
  }
};

QTEST_GUILESS_MAIN(TestStepReplay)
#include "tst_step_replay.moc"
