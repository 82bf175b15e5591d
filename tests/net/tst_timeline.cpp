// Timeline: spans sorted by start whatever the arrival order, trimming to the newest kMaxSpans
// and kMaxSteps, collective labels, phase kinds, recent_window, busy_seconds over overlapping
// spans, degenerate spans, and a 1,024-rank volume case. Expected values are worked out here.
#include <QtTest>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "net/timeline.h"
#include "tests/common/telemetry_events.h"

using namespace shardlab;
using namespace shardlab::net;
namespace tl = shardlab::telemetry;

namespace {

using test::make_event;

tl::Event phase(int rank, tl::Phase p, double start, double end, int mb = 0) {
  return make_event(rank, end, tl::PhaseEvent{0, mb, p, start, end});
}

tl::Event fwd(int rank, double start, double end, int mb = 0) {
  return phase(rank, tl::Phase::forward, start, end, mb);
}

tl::Event coll(int rank, const std::string& op, const std::string& group, double start,
               double duration, bool ok = true) {
  tl::CollectiveEvent c;
  c.op = op;
  c.group = group;
  c.start = start;
  c.duration = duration;
  c.ok = ok;
  return make_event(rank, start + duration, c);
}

tl::Event step(int rank, int64_t n, double end, double seconds) {
  tl::StepEvent s;
  s.step = n;
  s.step_seconds = seconds;
  return make_event(rank, end, s);
}

std::vector<std::pair<double, double>> intervals(const std::deque<Span>& spans) {
  std::vector<std::pair<double, double>> out;
  for (const Span& s : spans) out.emplace_back(s.start, s.end);
  return out;
}

}  // namespace

class TestTimeline : public QObject {
  Q_OBJECT

 private slots:
  // Collective labels are bounded like CommStats' rows, and printable.
  void labelsAreBounded() {
    Timeline t;
    for (int i = 0; i < 10000; ++i)
      t.add(coll(0, "all_reduce", "dp[" + std::to_string(i) + "]", 1.0 + i, 0.5));
    t.add(coll(0, "x\x1b]0;title\x07", "g", 20000.0, 0.5));
    QVERIFY2(t.labels().size() <= Timeline::kMaxLabels + 1,
             qPrintable(QString::number(t.labels().size())));
    for (const std::string& l : t.labels())
      for (const char c : l) QVERIFY(static_cast<unsigned char>(c) >= 0x20);
  }

  void empty() {
    Timeline t;
    QCOMPARE(t.ranks(), 0);
    QVERIFY(t.spans(0).empty());
    QVERIFY(t.steps(0).empty());
    QVERIFY(t.spans(-1).empty());
    QVERIFY(t.labels().empty());
    QCOMPARE(t.recent_window(10), (std::pair<double, double>{0.0, 0.0}));
    QCOMPARE(t.busy_seconds(0, 0, 10), 0.0);
    t.add(make_event(4, 1, tl::HeartbeatEvent{}));  // not taken
    t.add(fwd(-1, 1, 2));                           // negative rank: ignored
    QCOMPARE(t.ranks(), 0);
    // Spans but no step marks: still no window.
    t.add(fwd(2, 1, 2));
    QCOMPARE(t.ranks(), 3);
    QVERIFY(t.spans(0).empty());
    QCOMPARE(t.recent_window(1), (std::pair<double, double>{0.0, 0.0}));
  }

  void sortedDespiteArrivalOrder() {
    Timeline t;
    t.add(fwd(0, 3, 4));
    t.add(fwd(0, 1, 2));
    t.add(fwd(0, 2, 3.5));
    t.add(fwd(0, 2, 2.5));  // same start, earlier end: goes first
    t.add(fwd(0, 5, 6));
    t.add(fwd(0, 4, 4.5));
    t.add(fwd(1, 0.5, 1));  // another rank's lane is separate
    const std::vector<std::pair<double, double>> want{{1, 2}, {2, 2.5}, {2, 3.5},
                                                      {3, 4}, {4, 4.5}, {5, 6}};
    QCOMPARE(intervals(t.spans(0)), want);
    QCOMPARE(t.spans(1).size(), size_t{1});
    QCOMPARE(t.ranks(), 2);
  }

  void kindsAndLabels() {
    Timeline t;
    t.add(phase(0, tl::Phase::forward, 1, 2, 3));
    t.add(phase(0, tl::Phase::backward, 2, 3, 3));
    t.add(phase(0, tl::Phase::optimizer, 3, 4, 7));
    t.add(coll(0, "all_reduce", "dp[1]", 4, 0.5));
    t.add(coll(1, "send", "pp[0]", 4, 0.25, false));
    t.add(coll(1, "all_reduce", "dp[1]", 5, 0.5));
    QCOMPARE(t.labels(), (std::vector<std::string>{"all_reduce dp[1]", "send pp[0]"}));
    const auto& s0 = t.spans(0);
    QCOMPARE(s0.size(), size_t{4});
    QCOMPARE(s0[0].kind, SpanKind::forward);
    QCOMPARE(s0[0].micro_batch, 3);
    QCOMPARE(s0[1].kind, SpanKind::backward);
    QCOMPARE(s0[1].micro_batch, 3);
    QCOMPARE(s0[2].kind, SpanKind::optimizer);
    QCOMPARE(s0[2].micro_batch, -1);
    QCOMPARE(s0[3].kind, SpanKind::collective);
    QCOMPARE(s0[3].micro_batch, -1);
    QCOMPARE(s0[3].label, uint32_t{0});
    QCOMPARE(s0[3].end, 4.5);
    QVERIFY(s0[3].ok);
    const auto& s1 = t.spans(1);
    QCOMPARE(s1[0].label, uint32_t{1});
    QVERIFY(!s1[0].ok);
    QCOMPARE(s1[0].end, 4.25);
    QCOMPARE(s1[1].label, uint32_t{0});  // interned: the same label as rank 0's
    QCOMPARE(std::string(to_string(SpanKind::forward)), std::string("forward"));
    QCOMPARE(std::string(to_string(SpanKind::collective)), std::string("collective"));
  }

  void trimming() {
    Timeline t;
    const size_t n = Timeline::kMaxSpans + 100;
    for (size_t i = 0; i < n; ++i) t.add(fwd(0, static_cast<double>(i), i + 0.5));
    const auto& s = t.spans(0);
    QCOMPARE(s.size(), Timeline::kMaxSpans);
    QCOMPARE(s.front().start, 100.0);  // the oldest 100 dropped
    QCOMPARE(s.back().start, static_cast<double>(n - 1));
    // A late span older than everything kept is dropped again, not kept in place of a newer one.
    t.add(fwd(0, 50, 50.5));
    QCOMPARE(s.size(), Timeline::kMaxSpans);
    QCOMPARE(s.front().start, 100.0);
    // A late span inside the kept range stays; the oldest goes.
    t.add(fwd(0, 1000.25, 1000.3));
    QCOMPARE(s.size(), Timeline::kMaxSpans);
    QCOMPARE(s.front().start, 101.0);
    QCOMPARE(s[1000 - 101 + 1].start, 1000.25);
    for (size_t i = 1; i < s.size(); ++i) QVERIFY(s[i - 1].start <= s[i].start);

    const int64_t steps = static_cast<int64_t>(Timeline::kMaxSteps) + 44;
    for (int64_t i = 1; i <= steps; ++i) t.add(step(0, i, static_cast<double>(i), 0.5));
    const auto& m = t.steps(0);
    QCOMPARE(m.size(), Timeline::kMaxSteps);
    QCOMPARE(m.front().step, int64_t{45});
    QCOMPARE(m.back().step, steps);
    QCOMPARE(m.back().start, steps - 0.5);
    QCOMPARE(m.back().end, static_cast<double>(steps));
  }

  void stepMarksSortedByStep() {
    Timeline t;
    t.add(step(0, 2, 20, 8));
    t.add(step(0, 1, 10, 8));  // late
    t.add(step(0, 3, 30, 8));
    t.add(step(0, 3, 31, 9));  // repeated: replaces
    const auto& m = t.steps(0);
    QCOMPARE(m.size(), size_t{3});
    QCOMPARE(m[0].step, int64_t{1});
    QCOMPARE(m[1].step, int64_t{2});
    QCOMPARE(m[2].step, int64_t{3});
    QCOMPARE(m[2].start, 22.0);
    QCOMPARE(m[2].end, 31.0);
  }

  void recentWindow() {
    Timeline t;
    t.add(step(0, 1, 10, 8));   // [2, 10]
    t.add(step(0, 2, 20, 8));   // [12, 20]
    t.add(step(0, 3, 30, 8));   // [22, 30]
    t.add(step(1, 1, 11, 10));  // [1, 11]
    t.add(step(1, 2, 21, 10));  // [11, 21]
    t.add(fwd(1, 29, 31.5));    // after the newest step's end: outside the window
    QCOMPARE(t.recent_window(1), (std::pair<double, double>{22.0, 30.0}));
    QCOMPARE(t.recent_window(2), (std::pair<double, double>{11.0, 30.0}));
    QCOMPARE(t.recent_window(3), (std::pair<double, double>{1.0, 30.0}));
    QCOMPARE(t.recent_window(100), (std::pair<double, double>{1.0, 30.0}));
    QCOMPARE(t.recent_window(0), (std::pair<double, double>{22.0, 30.0}));  // as 1
    t.add(step(1, 4, 40, 5));  // a newer step mark moves both ends
    QCOMPARE(t.recent_window(1), (std::pair<double, double>{35.0, 40.0}));
    QCOMPARE(t.recent_window(2), (std::pair<double, double>{22.0, 40.0}));
  }

  void busySeconds() {
    Timeline t;
    t.add(fwd(0, 2, 5));
    t.add(fwd(0, 1, 3));  // overlaps [2, 5]
    t.add(coll(0, "all_reduce", "dp[0]", 7, 1));
    t.add(phase(0, tl::Phase::backward, 7.5, 7.75));  // inside [7, 8]
    t.add(phase(0, tl::Phase::optimizer, 10, 12));
    // Union: [1, 5] + [7, 8] + [10, 12].
    QCOMPARE(t.busy_seconds(0, 0, 100), 4.0 + 1.0 + 2.0);
    QCOMPARE(t.busy_seconds(0, 0, 6), 4.0);
    QCOMPARE(t.busy_seconds(0, 2.5, 11), 2.5 + 1.0 + 1.0);
    QCOMPARE(t.busy_seconds(0, 7.25, 7.5), 0.25);
    QCOMPARE(t.busy_seconds(0, 5, 7), 0.0);
    QCOMPARE(t.busy_seconds(0, 11, 2), 0.0);   // empty window
    QCOMPARE(t.busy_seconds(3, 0, 100), 0.0);  // unknown rank
    QCOMPARE(t.busy_seconds(-1, 0, 100), 0.0);
  }

  void degenerateSpans() {
    Timeline t;
    t.add(fwd(0, 5, 4));                             // ends before it starts: zero length
    t.add(coll(0, "all_reduce", "dp[0]", 6, -1.0));  // negative duration: zero length
    t.add(fwd(0, 7, 7));                             // zero length
    const double nan = std::numeric_limits<double>::quiet_NaN();
    t.add(fwd(0, nan, 3));  // no place in time: dropped
    t.add(coll(0, "send", "pp[0]", 1, std::numeric_limits<double>::infinity()));
    const std::vector<std::pair<double, double>> want{{5, 5}, {6, 6}, {7, 7}};
    QCOMPARE(intervals(t.spans(0)), want);
    QCOMPARE(t.busy_seconds(0, 0, 10), 0.0);
    t.add(step(0, 1, 8, -2));  // negative step seconds: the mark has zero length
    QCOMPARE(t.steps(0).front().start, 8.0);
    QCOMPARE(t.recent_window(1), (std::pair<double, double>{8.0, 8.0}));
  }

  // 1,024 ranks x 100 steps x 20 events (4 forwards, 4 backwards, an optimizer, 10 collectives
  // published newest first, a STEP), ranks interleaved step by step.
  void volume1024Ranks() {
    constexpr int kRanks = 1024, kSteps = 100, kMb = 4, kColl = 10;
    Timeline t;
    for (int s = 1; s <= kSteps; ++s)
      for (int r = 0; r < kRanks; ++r) {
        const double b = s + r * 1e-4;  // step s of rank r runs in [b, b + 1)
        for (int m = 0; m < kMb; ++m)
          t.add(phase(r, tl::Phase::forward, b + m * 0.05, b + m * 0.05 + 0.04, m));
        for (int m = kMb - 1; m >= 0; --m)
          t.add(phase(r, tl::Phase::backward, b + 0.2 + m * 0.05, b + 0.2 + m * 0.05 + 0.04, m));
        t.add(phase(r, tl::Phase::optimizer, b + 0.4, b + 0.45));
        for (int k = kColl - 1; k >= 0; --k)
          t.add(coll(r, k % 2 ? "all_gather" : "all_reduce", "dp[" + std::to_string(r % 8) + "]",
                     b + 0.5 + k * 0.04, 0.03));
        t.add(step(r, s, b + 0.9, 0.9));
      }
    QCOMPARE(t.ranks(), kRanks);
    QCOMPARE(t.labels().size(), size_t{2 * 8});
    const size_t per_rank = static_cast<size_t>(kSteps) * (2 * kMb + 1 + kColl);  // 1,900
    QVERIFY(per_rank < Timeline::kMaxSpans);
    for (int r : {0, 1, 517, 1023}) {
      const auto& sp = t.spans(r);
      QCOMPARE(sp.size(), per_rank);
      for (size_t i = 1; i < sp.size(); ++i) QVERIFY(sp[i - 1].start <= sp[i].start);
      // Step s's spans are 19 in a row: F0..F3, B0..B3, optimizer, collectives k = 0..9.
      const double b = 50 + r * 1e-4;
      auto st = sp.begin() + 49 * 19;  // a deque: iterators, not pointers
      QCOMPARE(st[0].kind, SpanKind::forward);
      QCOMPARE(st[0].start, b);
      QCOMPARE(st[5].kind, SpanKind::backward);
      QCOMPARE(st[5].micro_batch, 1);
      QCOMPARE(st[8].kind, SpanKind::optimizer);
      QCOMPARE(st[9].kind, SpanKind::collective);
      QCOMPARE(t.labels()[st[9].label], "all_reduce dp[" + std::to_string(r % 8) + "]");
      QCOMPARE(t.labels()[st[10].label], "all_gather dp[" + std::to_string(r % 8) + "]");
      // Busy in step 50: 8 x 0.04 + 0.05 + 10 x 0.03 = 0.67 s of the step's second.
      QVERIFY(std::abs(t.busy_seconds(r, b, b + 1) - 0.67) < 1e-9);
      const auto& m = t.steps(r);
      QCOMPARE(m.size(), size_t{kSteps});
      QCOMPARE(m.back().step, int64_t{kSteps});
    }
    // The last 2 steps: from rank 0's step-99 start to rank 1023's step-100 mark (after its
    // last collective, which ends at b + 0.89).
    const auto w = t.recent_window(2);
    QVERIFY(std::abs(w.first - 99.0) < 1e-9);
    QVERIFY(std::abs(w.second - (100 + 1023e-4 + 0.9)) < 1e-9);
  }
};

QTEST_GUILESS_MAIN(TestTimeline)
#include "tst_timeline.moc"
