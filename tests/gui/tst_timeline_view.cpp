// The timeline view, offscreen: a hand-made 2-stage pipeline (phases, sends, step ends) drawn
// lane by lane with forward, backward, optimizer and collective colours and grey idle gaps (also
// in the pixels), the window of the last N steps, the idle fraction of each stage, a 1,024-rank
// timeline; the loss chart's evaluation series; and exporting a view as PNG and CSV.
#include <QtTest>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QImage>
#include <QLineSeries>
#include <QScatterSeries>
#include <QTemporaryDir>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "gui/comm_heat_map.h"
#include "gui/export.h"
#include "gui/loss_chart.h"
#include "gui/timeline_view.h"
#include "net/run_model.h"
#include "tests/common/telemetry_events.h"

using namespace shardlab;
using namespace shardlab::gui;
using net::SpanKind;

namespace {

constexpr double kT0 = 1000.0;
constexpr double kMs = 1e-3;

class Feeder : public test::EventFeeder {
 public:
  using EventFeeder::EventFeeder;
  void phase(int rank, telemetry::Phase phase, int micro_batch, double start, double end,
             int virtual_stage = -1) {
    telemetry::PhaseEvent p;
    p.stage = virtual_stage >= 0 ? virtual_stage : rank;
    p.micro_batch = micro_batch;
    p.phase = phase;
    p.start = start;
    p.end = end;
    add(rank, end, p);
  }
  void collective(int rank, const std::string& op, const std::string& group, double start,
                  double end, bool ok = true) {
    telemetry::CollectiveEvent c;
    c.op = op;
    c.group = group;
    c.bytes = 4096;
    c.start = start;
    c.duration = end - start;
    c.ok = ok;
    add(rank, end, c);
  }
  void step(int rank, int64_t step, double time, double seconds, double loss = 1.0) {
    telemetry::StepEvent s;
    s.step = step;
    s.loss = loss;
    s.step_seconds = seconds;
    add(rank, time, s);
  }
  void eval(int rank, int64_t step, double loss, double accuracy) {
    telemetry::EvalEvent e;
    e.step = step;
    e.loss = loss;
    e.accuracy = accuracy;
    e.samples = 100;
    add(rank, kT0 + static_cast<double>(step), e);
  }
};

// Two steps 50 ms apart of a 2-stage pipeline, one micro-batch (times in ms after kT0 + 50 k):
//   stage 0 (rank 0): forward 0-10, send 10-12, idle, backward 30-40 (a tp all_reduce 33-36
//                     overlaps it), optimizer 40-45; step ends at 45 (45 ms long).
//   stage 1 (rank 1): idle 0-12, forward 12-20, backward 20-28, send 28-30, optimizer 30-35;
//                     step ends at 35 (35 ms long).
void feedPipeline(net::RunModel& model) {
  Feeder f(model);
  using telemetry::Phase;
  for (int k = 0; k < 2; ++k) {
    const double o = kT0 + 50 * kMs * k;
    auto at = [o](double ms) { return o + ms * kMs; };
    f.phase(0, Phase::forward, 0, at(0), at(10));
    f.collective(0, "send", "pp[0]", at(10), at(12));
    f.phase(1, Phase::forward, 0, at(12), at(20));
    f.phase(1, Phase::backward, 0, at(20), at(28));
    f.collective(1, "send", "pp[0]", at(28), at(30));
    f.phase(1, Phase::optimizer, -1, at(30), at(35));
    f.step(1, k + 1, at(35), 35 * kMs);
    f.collective(0, "all_reduce", "tp[0]", at(33), at(36));
    f.phase(0, Phase::backward, 0, at(30), at(40));
    f.phase(0, Phase::optimizer, -1, at(40), at(45));
    f.step(0, k + 1, at(45), 45 * kMs);
  }
}

QImage renderOf(QWidget& w) {
  QImage img(w.size(), QImage::Format_ARGB32_Premultiplied);
  img.fill(Qt::white);
  w.render(&img);
  return img;
}

// The pixel column of `time` in the view's plot.
int xOf(const TimelineView& v, double time) {
  const auto [w0, w1] = v.window();
  const QRect plot = v.plotRect();
  return plot.left() + static_cast<int>((time - w0) / (w1 - w0) * plot.width());
}

}  // namespace

class TestTimelineView : public QObject {
  Q_OBJECT
 private slots:
  void pipelineLanes() {
    net::RunModel model;
    feedPipeline(model);
    TimelineView view;
    view.resize(800, 300);
    QCOMPARE(view.steps(), TimelineView::kDefaultSteps);
    view.update(model);
    QCOMPARE(view.ranks(), 2);
    // Three steps asked, two exist: the window spans both.
    QCOMPARE(view.window().first, kT0);
    QCOMPARE(view.window().second, kT0 + 95 * kMs);

    const QColor fwd = TimelineView::kindColor(SpanKind::forward),
                 bwd = TimelineView::kindColor(SpanKind::backward),
                 opt = TimelineView::kindColor(SpanKind::optimizer),
                 coll = TimelineView::kindColor(SpanKind::collective),
                 idle = TimelineView::idleColor();
    struct Probe {
      int rank;
      double ms;
      QColor color;
    };
    const std::vector<Probe> probes = {
        {0, 5, fwd},     {0, 11, coll}, {0, 20, idle}, {0, 31, bwd}, {0, 34.5, bwd}, {0, 42, opt},
        {0, 47.5, idle}, {0, 55, fwd},  {1, 5, idle},  {1, 15, fwd}, {1, 25, bwd},   {1, 29, coll},
        {1, 32, opt},    {1, 42, idle}, {1, 61, idle}, {1, 66, fwd},
    };
    const QImage img = renderOf(view);
    if (qEnvironmentVariableIsSet("SHARDLAB_SAVE_VIEWS"))  // for eyeballing the lanes
      img.save(QDir::temp().filePath("shardlab-timeline.png"));
    for (const Probe& p : probes) {
      const double t = kT0 + p.ms * kMs;
      QVERIFY2(view.colorAt(p.rank, t) == p.color,
               qPrintable(QString("rank %1 at %2 ms: %3, expected %4")
                              .arg(p.rank)
                              .arg(p.ms)
                              .arg(view.colorAt(p.rank, t).name(), p.color.name())));
      // What colorAt reports is what the lane's top row shows.
      const QRect lane = view.laneRect(p.rank);
      QCOMPARE(img.pixelColor(xOf(view, t), lane.top()), p.color);
    }
    // The tp all_reduce during stage 0's backward is a thinner band across the lane's middle.
    const QRect lane0 = view.laneRect(0);
    const int x = xOf(view, kT0 + 34.5 * kMs);
    QCOMPARE(img.pixelColor(x, lane0.center().y()), coll);
    QCOMPARE(img.pixelColor(x, lane0.top() + 1), bwd);
    QCOMPARE(img.pixelColor(x, lane0.bottom()), bwd);
    // Step ends are thin dark lines (stage 0's first step ends at 45 ms).
    QCOMPARE(img.pixelColor(xOf(view, kT0 + 45 * kMs), lane0.center().y()),
             TimelineView::stepLineColor());
    // Outside the window or the ranks: nothing.
    QVERIFY(!view.colorAt(0, kT0 - kMs).isValid());
    QVERIFY(!view.colorAt(0, kT0 + 96 * kMs).isValid());
    QVERIFY(!view.colorAt(2, kT0 + 5 * kMs).isValid());

    // Idle time: stage 0 is busy 27 ms of each step (0-12, 30-45), stage 1 23 ms (12-35).
    QVERIFY(std::abs(view.idleFraction(0) - (1 - 54.0 / 95)) < 1e-9);
    QVERIFY(std::abs(view.idleFraction(1) - (1 - 46.0 / 95)) < 1e-9);
    QCOMPARE(view.idleFraction(5), 0.0);

    // Tooltips name the span.
    auto tipAt = [&](int rank, double ms) {
      const QRect lane = view.laneRect(rank);
      return view.toolTipAt(QPoint(xOf(view, kT0 + ms * kMs), lane.top() + 1));
    };
    QString tip = tipAt(1, 16);
    QVERIFY2(tip.startsWith("rank 1: forward, micro-batch 0, 8.") && tip.endsWith(" ms"),
             qPrintable(tip));
    tip = tipAt(0, 11);
    QVERIFY2(tip.startsWith("rank 0: send pp[0], 2."), qPrintable(tip));
    tip = tipAt(0, 42);
    QVERIFY2(tip.startsWith("rank 0: optimizer, 5."), qPrintable(tip));
    tip = tipAt(1, 5);
    QVERIFY2(tip.startsWith("rank 1: idle"), qPrintable(tip));
    QVERIFY(view.toolTipAt(QPoint(0, 0)).isEmpty());

    // CSV: every span of the window, times relative to its start.
    const QStringList lines = view.csv().split('\n', Qt::SkipEmptyParts);
    QCOMPARE(lines[0], QString("rank,kind,label,start,end"));
    QCOMPARE(lines.size(), 1 + 2 * (5 + 4));  // 5 spans of stage 0, 4 of stage 1, per step
    QVERIFY(lines.contains("0,forward,0,0,0.01"));
    QVERIFY(lines.contains("0,optimizer,,0.04,0.045"));
    const auto send = std::find_if(lines.begin(), lines.end(),
                                   [](const QString& l) { return l.startsWith("1,collective,"); });
    QVERIFY(send != lines.end());
    const QStringList f = send->split(',');
    QCOMPARE(f[2], QString("send pp[0]"));
    QVERIFY(std::abs(f[3].toDouble() - 0.028) < 1e-9 && std::abs(f[4].toDouble() - 0.030) < 1e-9);
  }

  void stepsChooseTheWindow() {
    net::RunModel model;
    feedPipeline(model);
    TimelineView view;
    view.resize(600, 200);
    QSignalSpy spy(&view, &TimelineView::stepsChanged);
    view.setSteps(1);
    QCOMPARE(spy.count(), 1);
    QCOMPARE(spy.at(0).at(0).toInt(), 1);
    view.update(model);
    QVERIFY(std::abs(view.window().first - (kT0 + 50 * kMs)) < 1e-9);
    QCOMPARE(view.window().second, kT0 + 95 * kMs);
    QVERIFY(!view.colorAt(0, kT0 + 5 * kMs).isValid());  // step 1 is out of the window
    QCOMPARE(view.colorAt(0, kT0 + 55 * kMs), TimelineView::kindColor(SpanKind::forward));
    QVERIFY(std::abs(view.idleFraction(1) - (1 - 23.0 / 45)) < 1e-9);

    view.setSteps(2);
    view.update(model);
    QCOMPARE(view.window().first, kT0);
    QCOMPARE(view.window().second, kT0 + 95 * kMs);
    view.setSteps(0);  // at least one
    QCOMPARE(view.steps(), 1);
    view.setSteps(1);  // unchanged: no signal
    QCOMPARE(spy.count(), 3);

    net::RunModel empty;
    view.update(empty);
    QCOMPARE(view.window(), std::make_pair(0.0, 0.0));
    QCOMPARE(view.ranks(), 0);
    QVERIFY(!view.colorAt(0, kT0).isValid());
    renderOf(view);  // paints without data
  }

  // Interleaved 1F1B, pp 2 with 2 chunks a stage: a PHASE's stage is its virtual stage (chunk * pp
  // + stage), so rank 0 runs virtual stages 0 and 2 and rank 1 runs 1 and 3. Chunk 1's forwards
  // and backwards are drawn lighter, the tooltip and the CSV name the chunk.
  void interleavedChunksAreShown() {
    net::RunModel model;
    for (int r = 0; r < 2; ++r) {
      net::Hello h;
      h.job_id = "job";
      h.rank = r;
      h.world = 2;
      h.pp = 2;
      h.pp_i = r;
      model.add(net::Message{h});
    }
    Feeder f(model);
    using telemetry::Phase;
    auto at = [](double ms) { return kT0 + ms * kMs; };
    // rank 0: F0 on chunk 0 (0-10), F0 on chunk 1 (20-30), B0 on chunk 1 (40-50), B0 on chunk 0
    // (60-70); rank 1: F0 chunk 0 (10-20), B0 chunk 1 (30-40) after F0 chunk 1 (30-35).
    f.phase(0, Phase::forward, 0, at(0), at(10), 0);
    f.phase(1, Phase::forward, 0, at(10), at(20), 1);
    f.phase(0, Phase::forward, 0, at(20), at(30), 2);
    f.phase(1, Phase::forward, 0, at(30), at(35), 3);
    f.phase(1, Phase::backward, 0, at(35), at(40), 3);
    f.phase(0, Phase::backward, 0, at(40), at(50), 2);
    f.phase(1, Phase::backward, 0, at(50), at(60), 1);
    f.phase(0, Phase::backward, 0, at(60), at(70), 0);
    f.step(1, 1, at(72), 72 * kMs);
    f.step(0, 1, at(75), 75 * kMs);
    TimelineView view;
    view.resize(800, 300);
    view.update(model);
    QCOMPARE(view.ranks(), 2);
    const QColor fwd = TimelineView::kindColor(SpanKind::forward),
                 bwd = TimelineView::kindColor(SpanKind::backward);
    const QColor fwd1 = TimelineView::computeColor(SpanKind::forward, 1),
                 bwd1 = TimelineView::computeColor(SpanKind::backward, 1);
    QVERIFY(fwd1 != fwd && bwd1 != bwd && fwd1 != bwd1);
    QCOMPARE(TimelineView::computeColor(SpanKind::forward, 0), fwd);
    QCOMPARE(TimelineView::computeColor(SpanKind::forward, 2), fwd);
    const QImage img = renderOf(view);
    if (qEnvironmentVariableIsSet("SHARDLAB_SAVE_VIEWS"))
      img.save(QDir::temp().filePath("shardlab-timeline-interleaved.png"));
    struct Probe {
      int rank;
      double ms;
      QColor color;
    };
    for (const Probe& p : std::vector<Probe>{{0, 5, fwd},
                                             {0, 25, fwd1},
                                             {0, 45, bwd1},
                                             {0, 65, bwd},
                                             {1, 15, fwd},
                                             {1, 32, fwd1},
                                             {1, 38, bwd1},
                                             {1, 55, bwd}}) {
      QVERIFY2(view.colorAt(p.rank, at(p.ms)) == p.color,
               qPrintable(QString("rank %1 at %2 ms: %3, expected %4")
                              .arg(p.rank)
                              .arg(p.ms)
                              .arg(view.colorAt(p.rank, at(p.ms)).name(), p.color.name())));
      QCOMPARE(img.pixelColor(xOf(view, at(p.ms)), view.laneRect(p.rank).top()), p.color);
    }
    const QRect lane0 = view.laneRect(0);
    const QString tip = view.toolTipAt(QPoint(xOf(view, at(25)), lane0.top() + 1));
    QVERIFY2(tip.startsWith("rank 0: forward, micro-batch 0, chunk 1, 10."), qPrintable(tip));
    const QString tip0 = view.toolTipAt(QPoint(xOf(view, at(65)), lane0.top() + 1));
    QVERIFY2(tip0.startsWith("rank 0: backward, micro-batch 0, chunk 0, 10."), qPrintable(tip0));
    const QStringList lines = view.csv().split('\n', Qt::SkipEmptyParts);
    QVERIFY(lines.contains("0,forward,0,0,0.01"));
    QVERIFY(lines.contains("0,forward,0@1,0.02,0.03"));
    QVERIFY(lines.contains("1,backward,0@1,0.035,0.04"));
  }

  void lanesFor1024Ranks() {
    net::RunModel model;
    Feeder f(model);
    using telemetry::Phase;
    for (int s = 1; s <= 3; ++s) {
      const double o = kT0 + (s - 1) * 0.1;
      for (int r = 0; r < 1024; ++r) {
        const double w = 0.001 * (r % 7);  // some ranks start late
        f.phase(r, Phase::forward, 0, o + w, o + 0.03);
        f.phase(r, Phase::backward, 0, o + 0.03, o + 0.06);
        f.collective(r, "all_reduce", "dp[" + std::to_string(r % 128) + "]", o + 0.06, o + 0.08);
        f.phase(r, Phase::optimizer, -1, o + 0.08, o + 0.09);
        f.step(r, s, o + 0.09, 0.09);
      }
    }
    TimelineView view;
    view.resize(1200, 900);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.update(model);
    QCOMPARE(view.ranks(), 1024);
    QCOMPARE(view.laneHeight(), 1);
    QCOMPARE(view.visibleRanks(), std::min(1024, view.plotRect().height()));
    QVERIFY(view.laneRect(0).isValid());
    QVERIFY(view.laneRect(view.visibleRanks()).isNull());
    const QImage img = renderOf(view);
    if (qEnvironmentVariableIsSet("SHARDLAB_SAVE_VIEWS"))
      img.save(QDir::temp().filePath("shardlab-timeline-1024.png"));
    const double t = kT0 + 0.1 + 0.045;  // step 2's backward
    QCOMPARE(img.pixelColor(xOf(view, t), view.laneRect(0).top()),
             TimelineView::kindColor(SpanKind::backward));
    QCOMPARE(view.colorAt(1023, t), TimelineView::kindColor(SpanKind::backward));
    int iterations = 0;
    QElapsedTimer timer;
    timer.start();
    QBENCHMARK {
      view.update(model);
      view.repaint();
      ++iterations;
    }
    qInfo(
        "TimelineView update(model) + repaint(), 1024 ranks x 3 steps at 1200x900: %.3f ms per "
        "iteration (%d iterations)",
        static_cast<double>(timer.nsecsElapsed()) / 1e6 / std::max(iterations, 1), iterations);
  }

  void lossChartShowsEvaluations() {
    net::RunModel model;
    Feeder f(model);
    for (int s = 1; s <= 10; ++s) {
      f.step(0, s, kT0 + s, 0.1, 2.0 / s);
      f.step(1, s, kT0 + s, 0.1, 2.0 / s);
    }
    f.eval(0, 0, 2.5, 0.1);
    f.eval(0, 5, 1.5, 0.4);
    f.eval(0, 10, 0.9, 0.75);
    f.eval(1, 10, 9.0, 0.0);  // another rank's report is not drawn
    LossChart chart;
    chart.resize(600, 400);
    chart.update(model);
    QCOMPARE(chart.series()->count(), 10);
    const QList<QPointF> expected_loss = {{0, 2.5}, {5, 1.5}, {10, 0.9}};
    const QList<QPointF> expected_acc = {{0, 0.1}, {5, 0.4}, {10, 0.75}};
    QCOMPARE(chart.evalLossSeries()->points(), expected_loss);
    QCOMPARE(chart.evalAccuracySeries()->points(), expected_acc);
    QCOMPARE(chart.accuracyAxis()->min(), 0.0);
    QCOMPARE(chart.accuracyAxis()->max(), 1.0);
    // Eval loss shares the loss axes; accuracy has its own.
    QVERIFY(chart.evalLossSeries()->attachedAxes().contains(chart.series()->attachedAxes().at(1)));
    QVERIFY(chart.evalAccuracySeries()->attachedAxes().contains(chart.accuracyAxis()));

    const QStringList lines = chart.csv().split('\n', Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 1 + 11);  // steps 0..10
    QCOMPARE(lines[0], QString("step,loss,eval_loss,eval_accuracy"));
    QCOMPARE(lines[1], QString("0,,2.5,0.1"));
    QCOMPARE(lines[3], QString("2,1,,"));
    QCOMPARE(lines[6], QString("5,0.4,1.5,0.4"));
    QCOMPARE(lines[11], QString("10,0.2,0.9,0.75"));

    // A model without evaluations empties the series (whole-series replace).
    net::RunModel plain;
    Feeder g(plain);
    g.step(0, 1, kT0, 0.1, 1.0);
    chart.update(plain);
    QCOMPARE(chart.evalLossSeries()->count(), 0);
    QCOMPARE(chart.evalAccuracySeries()->count(), 0);
    QCOMPARE(chart.series()->count(), 1);
  }

  void exportPngAndCsv() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    net::RunModel model;
    feedPipeline(model);
    CommHeatMap map;
    map.resize(320, 200);
    map.update(model);

    QString error;
    const QString png = dir.filePath("heat.png");
    QVERIFY2(savePng(&map, png, &error), qPrintable(error));
    const QImage img(png);
    QVERIFY(!img.isNull());
    QCOMPARE(img.size(), map.size() * map.devicePixelRatio());

    const QString csv = dir.filePath("heat.csv");
    QVERIFY2(saveText(csv, map.csv(), &error), qPrintable(error));
    QFile in(csv);
    QVERIFY(in.open(QIODevice::ReadOnly));
    QCOMPARE(QString::fromUtf8(in.readAll()), map.csv());
    in.close();
    // Overwriting replaces the whole file.
    QVERIFY(saveText(csv, "a,b\n", &error));
    QVERIFY(in.open(QIODevice::ReadOnly));
    QCOMPARE(in.readAll(), QByteArray("a,b\n"));

    const QString bad = "/nonexistent-dir/x.png";
    error.clear();
    QVERIFY(!savePng(&map, bad, &error));
    QVERIFY2(error.contains(bad), qPrintable(error));
    QVERIFY(!QFile::exists(bad));
    error.clear();
    QVERIFY(!saveText("/nonexistent-dir/x.csv", "x", &error));
    QVERIFY2(error.contains("/nonexistent-dir/x.csv"), qPrintable(error));
    error.clear();
    QVERIFY(!savePng(&map, QString(), &error));
    QVERIFY(!error.isEmpty());
    error.clear();
    QVERIFY(!savePng(nullptr, png, &error));
    QVERIFY(!error.isEmpty());
    QVERIFY(!saveText(QString(), "x"));  // no error pointer: still refuses
  }

  // The kinds' colours are the palette both front ends read (engine/telemetry/palette.h), the web
  // page's too: written out here.
  void coloursAreTheSharedPalettes() {
    QCOMPARE(TimelineView::kindColor(SpanKind::forward), QColor(0x4e, 0x79, 0xa7));
    QCOMPARE(TimelineView::kindColor(SpanKind::backward), QColor(0xf2, 0x8e, 0x2b));
    QCOMPARE(TimelineView::kindColor(SpanKind::optimizer), QColor(0x59, 0xa1, 0x4f));
    QCOMPARE(TimelineView::kindColor(SpanKind::collective), QColor(0xb0, 0x7a, 0xa1));
    QCOMPARE(TimelineView::idleColor(), QColor(0xde, 0xde, 0xde));
    QCOMPARE(TimelineView::failedColor(), QColor(0xd6, 0x27, 0x28));
    // An odd chunk's shade is the base colour lighter, not another hue.
    const QColor odd = TimelineView::computeColor(SpanKind::backward, 1);
    QVERIFY(odd.lightness() > QColor(0xf2, 0x8e, 0x2b).lightness());
    QVERIFY(qAbs(odd.hue() - QColor(0xf2, 0x8e, 0x2b).hue()) <= 2);
  }
};

QTEST_MAIN(TestTimelineView)
#include "tst_timeline_view.moc"
