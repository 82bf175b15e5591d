// Pipeline schedules: every stage's op list is a valid order for GPipe, 1F1B and interleaved 1F1B
// over a sweep of stages x micro-batches (each micro-batch once forward and once backward, the
// backward after the forward, in-flight bounds); the simulated bubble against the closed form
// (p-1)/(m+p-1) (Narayanan et al. 2021, section 2.2); exact op lists written out by hand;
// corrupted schedules rejected by validate() with a reason; make_schedule errors.
#include <QtTest>

#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "engine/core/error.h"
#include "engine/hybrid/pipeline_schedule.h"
#include "tests/common/caught.h"

using namespace shardlab;

using shardlab::test::caught;

namespace {

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

bool contains_ci(const std::string& hay, const std::string& needle) {
  return qs(hay).contains(qs(needle), Qt::CaseInsensitive);
}

// Parses "F0 F1 B0 F2@1" into ops, independently of to_string.
std::vector<PipelineOp> parse(const QString& text) {
  std::vector<PipelineOp> out;
  for (const QString& tok : text.split(' ', Qt::SkipEmptyParts)) {
    PipelineOp op;
    op.kind = tok[0] == 'F' ? PhaseKind::forward : PhaseKind::backward;
    const QStringList parts = tok.mid(1).split('@');
    op.micro_batch = parts[0].toInt();
    op.chunk = parts.size() > 1 ? parts[1].toInt() : 0;
    out.push_back(op);
  }
  return out;
}

// A schedule whose op lists are given outright: the way to build broken ones.
class FixedSchedule : public PipelineSchedule {
 public:
  FixedSchedule(std::vector<std::vector<PipelineOp>> ops, int micro_batches, int chunks = 1)
      : PipelineSchedule(int(ops.size()), micro_batches, chunks), ops_(std::move(ops)) {}
  std::string name() const override { return "fixed"; }
  std::vector<PipelineOp> ops(int stage) const override {
    check_stage(stage);
    return ops_[size_t(stage)];
  }

 private:
  std::vector<std::vector<PipelineOp>> ops_;
};

std::vector<std::vector<PipelineOp>> all_ops(const PipelineSchedule& s) {
  std::vector<std::vector<PipelineOp>> out;
  for (int st = 0; st < s.stages(); ++st) out.push_back(s.ops(st));
  return out;
}

}  // namespace

class TestPipelineSchedule : public QObject {
  Q_OBJECT

 private:
  static void add_sweep_rows(bool with_interleaved) {
    QTest::addColumn<QString>("name");
    QTest::addColumn<int>("p");
    QTest::addColumn<int>("m");
    QTest::addColumn<int>("v");
    for (const char* name : {"gpipe", "1f1b"})
      for (int p = 1; p <= 8; ++p)
        for (int m = 1; m <= 16; ++m)
          QTest::addRow("%s p=%d m=%d", name, p, m) << QString(name) << p << m << 1;
    if (!with_interleaved) return;
    for (int p = 1; p <= 8; ++p)
      for (int m = p; m <= 16; m += p)
        for (int v = 2; v <= 4; ++v)
          QTest::addRow("interleaved p=%d m=%d v=%d", p, m, v)
              << QString("interleaved") << p << m << v;
  }

 private slots:
  void to_string_forms() {
    QCOMPARE(qs(to_string(PipelineOp{PhaseKind::forward, 3})), QString("F3"));
    QCOMPARE(qs(to_string(PipelineOp{PhaseKind::backward, 0})), QString("B0"));
    QCOMPARE(qs(to_string(PipelineOp{PhaseKind::forward, 3, 1})), QString("F3@1"));
    QCOMPARE(qs(to_string(PipelineOp{PhaseKind::backward, 12, 2})), QString("B12@2"));
    QCOMPARE(qs(to_string(parse("F0 F1 B0@1"))), QString("F0 F1 B0@1"));
    QVERIFY((PipelineOp{PhaseKind::forward, 1, 0} == PipelineOp{PhaseKind::forward, 1, 0}));
    QVERIFY(!(PipelineOp{PhaseKind::forward, 1, 0} == PipelineOp{PhaseKind::backward, 1, 0}));
    QVERIFY(!(PipelineOp{PhaseKind::forward, 1, 0} == PipelineOp{PhaseKind::forward, 2, 0}));
    QVERIFY(!(PipelineOp{PhaseKind::forward, 1, 0} == PipelineOp{PhaseKind::forward, 1, 1}));
  }

  void valid_orders_data() { add_sweep_rows(true); }
  void valid_orders() {
    QFETCH(QString, name);
    QFETCH(int, p);
    QFETCH(int, m);
    QFETCH(int, v);
    const auto sched = make_schedule(name.toStdString(), p, m, v);
    QCOMPARE(qs(sched->name()), name);
    QCOMPARE(sched->stages(), p);
    QCOMPARE(sched->micro_batches(), m);
    QCOMPARE(sched->chunks(), v);
    std::string why;
    QVERIFY2(validate(*sched, &why), why.c_str());

    for (int s = 0; s < p; ++s) {
      const std::vector<PipelineOp> ops = sched->ops(s);
      QCOMPARE(int(ops.size()), 2 * m * v);
      // position of each (kind, chunk, mb); every one exactly once
      std::map<std::tuple<int, int, int>, int> pos;
      int forwards = 0, backwards = 0, in_flight = 0, most = 0;
      for (int i = 0; i < int(ops.size()); ++i) {
        const PipelineOp& op = ops[size_t(i)];
        QVERIFY(op.micro_batch >= 0 && op.micro_batch < m);
        QVERIFY(op.chunk >= 0 && op.chunk < v);
        const bool fwd = op.kind == PhaseKind::forward;
        QVERIFY2(pos.emplace(std::tuple{fwd ? 0 : 1, op.chunk, op.micro_batch}, i).second,
                 qPrintable(QString("stage %1 repeats %2").arg(s).arg(qs(to_string(op)))));
        (fwd ? forwards : backwards) += 1;
        in_flight += fwd ? 1 : -1;
        most = std::max(most, in_flight);
        QVERIFY(in_flight >= 0);
      }
      QCOMPARE(forwards, m * v);
      QCOMPARE(backwards, m * v);
      QCOMPARE(in_flight, 0);
      for (int c = 0; c < v; ++c)
        for (int mb = 0; mb < m; ++mb)
          QVERIFY2(
              pos.at({1, c, mb}) > pos.at({0, c, mb}),
              qPrintable(QString("stage %1: B%2@%3 before its forward").arg(s).arg(mb).arg(c)));
      QCOMPARE(max_in_flight(*sched, s), most);
      if (name == "1f1b") {
        QVERIFY2(most <= p - s, qPrintable(QString("stage %1 holds %2").arg(s).arg(most)));
        QCOMPARE(most, std::min(p - s, m));  // the bound is reached
        if (s == 0) QVERIFY(most <= p);
      }
      if (name == "gpipe") QCOMPARE(most, m);  // all m forwards held before the first backward
      if (name == "interleaved") {
        // Megatron: warm-up (p - s - 1) * 2 + (v - 1) * p forwards, plus one in steady state.
        const int expect = m == p ? m * v : std::min((p - s - 1) * 2 + (v - 1) * p + 1, m * v);
        QCOMPARE(most, expect);
      }
    }
    if (name == "gpipe" && m > p) QVERIFY(max_in_flight(*sched, 0) > p);
  }

  void bubble_data() { add_sweep_rows(true); }
  void bubble() {
    QFETCH(QString, name);
    QFETCH(int, p);
    QFETCH(int, m);
    QFETCH(int, v);
    const double tf = 1.0, tb = 2.0;
    const auto sched = make_schedule(name.toStdString(), p, m, v);
    const ScheduleTiming t = simulate(*sched, tf, tb);
    QCOMPARE(int(t.busy.size()), p);
    QCOMPARE(int(t.idle.size()), p);
    double idle = 0;
    for (int s = 0; s < p; ++s) {
      QVERIFY(std::abs(t.busy[size_t(s)] - m * (tf + tb)) < 1e-12);
      QVERIFY(std::abs(t.busy[size_t(s)] + t.idle[size_t(s)] - t.step_time) < 1e-12);
      idle += t.idle[size_t(s)];
    }
    QVERIFY(std::abs(t.bubble_fraction - idle / (p * t.step_time)) < 1e-12);
    if (name != "interleaved") {
      // Narayanan et al. 2021 §2.2: step (m+p-1)(tf+tb), idle fraction (p-1)/(m+p-1).
      const double expect = double(p - 1) / double(m + p - 1);
      const QString msg = QString("bubble %1 expected %2")
                              .arg(t.bubble_fraction, 0, 'g', 17)
                              .arg(expect, 0, 'g', 17);
      QVERIFY2(std::abs(t.bubble_fraction - expect) < 1e-12, qPrintable(msg));
      QVERIFY(std::abs(t.step_time - (m + p - 1) * (tf + tb)) < 1e-12);
      QVERIFY(std::abs(bubble_fraction_formula(p, m) - expect) < 1e-15);
    } else {
      // Interleaving cuts the bubble time to (p-1)(tf+tb)/v (Narayanan et al. 2021 §2.2.2).
      const double expect = double(p - 1) / double(v * m + p - 1);
      const QString msg = QString("bubble %1 expected %2")
                              .arg(t.bubble_fraction, 0, 'g', 17)
                              .arg(expect, 0, 'g', 17);
      QVERIFY2(std::abs(t.bubble_fraction - expect) < 1e-12, qPrintable(msg));
    }
  }

  void exact_ops_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<int>("p");
    QTest::addColumn<int>("m");
    QTest::addColumn<int>("v");
    QTest::addColumn<QStringList>("expected");  // one entry per stage, written out by hand
    QTest::newRow("1f1b p=2 m=3") << "1f1b" << 2 << 3 << 1
                                  << QStringList{"F0 F1 B0 F2 B1 B2", "F0 B0 F1 B1 F2 B2"};
    QTest::newRow("gpipe p=2 m=3")
        << "gpipe" << 2 << 3 << 1 << QStringList{"F0 F1 F2 B2 B1 B0", "F0 F1 F2 B2 B1 B0"};
    QTest::newRow("1f1b p=4 m=8") << "1f1b" << 4 << 8 << 1
                                  << QStringList{"F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7",
                                                 "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7",
                                                 "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7",
                                                 "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"};
    QTest::newRow("1f1b p=4 m=2") << "1f1b" << 4 << 2 << 1
                                  << QStringList{"F0 F1 B0 B1", "F0 F1 B0 B1", "F0 F1 B0 B1",
                                                 "F0 B0 F1 B1"};
    QTest::newRow("1f1b p=1 m=3") << "1f1b" << 1 << 3 << 1 << QStringList{"F0 B0 F1 B1 F2 B2"};
    QTest::newRow("interleaved p=2 m=4 v=2")
        << "interleaved" << 2 << 4 << 2
        << QStringList{"F0 F1 F0@1 F1@1 F2 B0@1 F3 B1@1 F2@1 B0 F3@1 B1 B2@1 B3@1 B2 B3",
                       "F0 F1 F0@1 B0@1 F1@1 B1@1 F2 B0 F3 B1 F2@1 B2@1 F3@1 B3@1 B2 B3"};
    QTest::newRow("interleaved p=2 m=2 v=2")
        << "interleaved" << 2 << 2 << 2
        << QStringList{"F0 F1 F0@1 F1@1 B0@1 B1@1 B0 B1", "F0 F1 F0@1 F1@1 B0@1 B1@1 B0 B1"};
  }
  void exact_ops() {
    QFETCH(QString, name);
    QFETCH(int, p);
    QFETCH(int, m);
    QFETCH(int, v);
    QFETCH(QStringList, expected);
    const auto sched = make_schedule(name.toStdString(), p, m, v);
    QCOMPARE(expected.size(), p);
    for (int s = 0; s < p; ++s) {
      const std::vector<PipelineOp> got = sched->ops(s);
      QVERIFY2(
          got == parse(expected[s]),
          qPrintable(
              QString("stage %1: got %2 expected %3").arg(s).arg(qs(to_string(got)), expected[s])));
    }
  }

  // Hand-computed timeline: 1f1b p=2 m=2, tf=1, tb=2. Stage 0: F0 [0,1] F1 [1,2] B0 [4,6]
  // (after stage 1's B0 at [2,4]) B1 [7,9] (after stage 1's B1 at [5,7]); stage 1: F0 [1,2]
  // B0 [2,4] F1 [4,5] B1 [5,7]. Step 9, busy 6 each, idle 3 each.
  void timeline_by_hand() {
    const ScheduleTiming t = simulate(OneFOneBSchedule(2, 2), 1.0, 2.0);
    QCOMPARE(t.step_time, 9.0);
    QCOMPARE(t.busy, (std::vector<double>{6.0, 6.0}));
    QCOMPARE(t.idle, (std::vector<double>{3.0, 3.0}));
    QCOMPARE(t.bubble_fraction, 6.0 / 18.0);
    // non-uniform: tf=1, tb=3, gpipe p=3 m=2: forwards end at 4 on stage 2, backwards chain
    // 2 * 3 on each stage, each stage one tb later: step 4 + 6 + 2 * 3 = 16.
    const ScheduleTiming g = simulate(GPipeSchedule(3, 2), 1.0, 3.0);
    QCOMPARE(g.step_time, 16.0);
    QCOMPARE(g.bubble_fraction, (3 * 16.0 - 3 * 8.0) / (3 * 16.0));
  }

  void corrupted_rejected_data() {
    QTest::addColumn<QStringList>("stages");
    QTest::addColumn<int>("m");
    QTest::addColumn<int>("v");
    QTest::addColumn<QString>("needle");  // expected in the reason
    QTest::newRow("valid") << QStringList{"F0 F1 B0 F2 B1 B2", "F0 B0 F1 B1 F2 B2"} << 3 << 1 << "";
    QTest::newRow("dropped backward")
        << QStringList{"F0 F1 B0 F2 B1", "F0 B0 F1 B1 F2 B2"} << 3 << 1 << "B2";
    QTest::newRow("dropped forward on receiver")
        << QStringList{"F0 F1 B0 F2 B1 B2", "F0 B0 F1 B1 B2"} << 3 << 1 << "receive";
    QTest::newRow("dropped op on one stage")
        << QStringList{"F0 B0 F1 B1"} << 3 << 1 << "never runs";
    QTest::newRow("backward before forward")
        << QStringList{"F0 F1 B0 B2 F2 B1", "F0 B0 F1 B1 F2 B2"} << 3 << 1 << "before";
    QTest::newRow("duplicate") << QStringList{"F0 F1 B0 F1 B1", "F0 B0 F1 B1"} << 2 << 1 << "twice";
    QTest::newRow("micro-batch out of range")
        << QStringList{"F0 F3 B0 B3", "F0 B0 F1 B1"} << 2 << 1 << "outside";
    QTest::newRow("chunk out of range") << QStringList{"F0 F0@2 B0@2 B0"} << 1 << 2 << "outside";
    QTest::newRow("deadlock") << QStringList{"F0 B0 F1 B1", "F1 B1 F0 B0"} << 2 << 1 << "deadlock";
    QTest::newRow("interleaved chunk order deadlock")
        << QStringList{"F0 F0@1 B0@1 B0", "F0@1 F0 B0 B0@1"} << 1 << 2 << "deadlock";
  }
  void corrupted_rejected() {
    QFETCH(QStringList, stages);
    QFETCH(int, m);
    QFETCH(int, v);
    QFETCH(QString, needle);
    std::vector<std::vector<PipelineOp>> ops;
    for (const QString& s : stages) ops.push_back(parse(s));
    const FixedSchedule sched(ops, m, v);
    std::string why;
    const bool ok = validate(sched, &why);
    qDebug("%s", why.c_str());
    if (needle.isEmpty()) {
      QVERIFY2(ok, why.c_str());
      QVERIFY(caught([&] { simulate(sched, 1, 2); }).first.empty());
      return;
    }
    QVERIFY(!ok);
    QVERIFY2(contains_ci(why, needle.toStdString()), why.c_str());
    QVERIFY(!validate(sched));  // null why is fine
    const auto [type, msg] = caught([&] { simulate(sched, 1, 2); });
    QCOMPARE(qs(type), QString("InvalidArgument"));
    QVERIFY2(contains_ci(msg, needle.toStdString()), msg.c_str());
  }

  // Each real schedule, with one op removed or one backward moved before its forward, is refused.
  void every_single_corruption_rejected() {
    for (const char* name : {"gpipe", "1f1b"})
      for (int p = 1; p <= 4; ++p)
        for (int m = 1; m <= 5; ++m) {
          const auto good = make_schedule(name, p, m);
          const auto ops = all_ops(*good);
          for (int s = 0; s < p; ++s)
            for (size_t i = 0; i < ops[size_t(s)].size(); ++i) {
              auto dropped = ops;
              dropped[size_t(s)].erase(dropped[size_t(s)].begin() + long(i));
              QVERIFY(!validate(FixedSchedule(dropped, m)));
              const PipelineOp op = ops[size_t(s)][i];
              if (op.kind != PhaseKind::backward) continue;
              // move the backward to the front of its stage: now before its forward
              auto swapped = ops;
              auto& list = swapped[size_t(s)];
              list.erase(list.begin() + long(i));
              list.insert(list.begin(), op);
              std::string why;
              QVERIFY(!validate(FixedSchedule(swapped, m), &why));
              QVERIFY2(contains_ci(why, "before"), why.c_str());
            }
        }
  }

  void make_schedule_errors_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<int>("p");
    QTest::addColumn<int>("m");
    QTest::addColumn<int>("v");
    QTest::addColumn<QStringList>("needles");
    QTest::newRow("unknown") << "zb-h1" << 2 << 4 << 1
                             << QStringList{"zb-h1", "gpipe", "1f1b", "interleaved"};
    QTest::newRow("empty name") << "" << 2 << 4 << 1 << QStringList{"gpipe", "1f1b"};
    QTest::newRow("gpipe p=0") << "gpipe" << 0 << 4 << 1 << QStringList{"parallel.pp", "0"};
    QTest::newRow("1f1b p=-1") << "1f1b" << -1 << 4 << 1 << QStringList{"parallel.pp", "-1"};
    QTest::newRow("gpipe m=0") << "gpipe" << 2 << 0 << 1 << QStringList{"micro_batches"};
    QTest::newRow("1f1b m=0") << "1f1b" << 2 << 0 << 1 << QStringList{"micro_batches"};
    QTest::newRow("1f1b chunks=2") << "1f1b" << 2 << 4 << 2 << QStringList{"chunks"};
    QTest::newRow("interleaved chunks=1") << "interleaved" << 2 << 4 << 1 << QStringList{"chunks"};
    QTest::newRow("interleaved m%p")
        << "interleaved" << 4 << 6 << 2 << QStringList{"micro_batches", "multiple"};
    QTest::newRow("interleaved p=0") << "interleaved" << 0 << 4 << 2 << QStringList{"parallel.pp"};
  }
  void make_schedule_errors() {
    QFETCH(QString, name);
    QFETCH(int, p);
    QFETCH(int, m);
    QFETCH(int, v);
    QFETCH(QStringList, needles);
    const auto [type, msg] = caught([&] { make_schedule(name.toStdString(), p, m, v); });
    QCOMPARE(qs(type), QString("InvalidArgument"));
    for (const QString& n : needles)
      QVERIFY2(contains_ci(msg, n.toStdString()), qPrintable(qs(msg) + " lacks " + n));
  }

  void other_errors() {
    const OneFOneBSchedule s(3, 4);
    for (int bad : {-1, 3}) {
      const auto [type, msg] = caught([&] { (void)s.ops(bad); });
      QCOMPARE(qs(type), QString("InvalidArgument"));
      QVERIFY(contains_ci(msg, "stage"));
    }
    for (auto [tf, tb] : {std::pair{-1.0, 1.0}, std::pair{1.0, std::nan("")},
                          std::pair{1.0, std::numeric_limits<double>::infinity()}}) {
      const auto [type, msg] = caught([&] { simulate(s, tf, tb); });
      QCOMPARE(qs(type), QString("InvalidArgument"));
    }
    QVERIFY(caught([&] { simulate(s, 0.0, 0.0); }).first.empty());
    QCOMPARE(qs(caught([] { bubble_fraction_formula(0, 1); }).first), QString("InvalidArgument"));
  }
};

QTEST_GUILESS_MAIN(TestPipelineSchedule)
#include "tst_pipeline_schedule.moc"
