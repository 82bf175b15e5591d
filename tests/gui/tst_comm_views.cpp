// The communication views, offscreen, fed by a RunModel with hand-made COLLECTIVE, PHASE and STEP
// events (expected figures computed here from the events): the heat map's dimensions and per-cell
// seconds, its metrics (wait, transfer, compute, all communication) switched on the same model, a
// straggler that shows as the cold row among hot ones in wait and the hot one in compute, the
// (op, group) table's rows, sums and sorting, and the per-kind summary. Redrawing a 1,024-rank x
// 200-step heat map is benchmarked (reported, not gated).
#include <QtTest>

#include <QDir>
#include <QElapsedTimer>
#include <QImage>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gui/comm_heat_map.h"
#include "gui/comm_table.h"
#include "net/run_model.h"
#include "tests/common/telemetry_events.h"

using namespace shardlab;
using namespace shardlab::gui;

namespace {

// Feeds events with per-rank sequence numbers.
class Feeder : public test::EventFeeder {
 public:
  using EventFeeder::EventFeeder;
  void collective(int rank, const std::string& op, const std::string& group, int64_t bytes,
                  double start, double duration, double busbw = 0, bool ok = true, double wait = -1,
                  int last_rank = -1) {
    telemetry::CollectiveEvent c;
    c.op = op;
    c.group = group;
    c.bytes = bytes;
    c.start = start;
    c.duration = duration;
    c.busbw = busbw;
    c.algbw = busbw;
    c.ok = ok;
    c.wait = wait;
    c.last_rank = last_rank;
    add(rank, start + duration, c);
  }
  void phase(int rank, telemetry::Phase p, double start, double end) {
    telemetry::PhaseEvent e;
    e.phase = p;
    e.micro_batch = p == telemetry::Phase::optimizer ? -1 : 0;
    e.start = start;
    e.end = end;
    add(rank, end, e);
  }
  void step(int rank, int64_t step, double time, double seconds) {
    telemetry::StepEvent s;
    s.step = step;
    s.loss = 1.0 / static_cast<double>(step);
    s.step_seconds = seconds;
    add(rank, time, s);
  }
};

constexpr double kT0 = 1.7e9;  // an epoch time

// Each step: rank 7 (the straggler) computes 49 ms longer than ranks 0..6, which then sit `hot`
// seconds in the all_reduce, all but the last `cold` of them waiting for rank 7; rank 7 itself
// spends `cold` there, none of it waiting.
void feedStraggler(net::RunModel& model, int steps, double hot, double cold) {
  Feeder f(model);
  for (int s = 1; s <= steps; ++s) {
    const double t = kT0 + s * 0.2;
    for (int r = 0; r < 8; ++r) {
      const double d = r == 7 ? cold : hot;
      f.phase(r, telemetry::Phase::forward, t, t + 0.1 - d);
      f.collective(r, "all_reduce", "world", 4 << 20, t + 0.1 - d, d, 20.0, true,
                   r == 7 ? 0.0 : hot - cold, 7);
      f.step(r, s, t + 0.11, 0.2);
    }
  }
}

const net::RunModel& bigModel() {
  static const net::RunModel model = [] {
    net::RunModel m;
    Feeder f(m);
    for (int s = 1; s <= 200; ++s) {
      const double t = kT0 + s * 0.1;
      for (int r = 0; r < 1024; ++r) {
        const double d = 0.005 + 0.0001 * ((r * 7 + s * 13) % 50);
        f.collective(r, "all_reduce", "dp[" + std::to_string(r / 8) + "]", 1 << 20, t, d, 50);
        f.step(r, s, t + 0.05, 0.1);
      }
    }
    return m;
  }();
  return model;
}

QPoint cellCenter(const CommHeatMap& map, int rank, int64_t step) {
  const QRect plot = map.plotRect();
  const double x = plot.left() +
                   (static_cast<double>(step - map.firstStep()) + 0.5) * plot.width() / map.steps();
  const double y = plot.top() + (rank + 0.5) * plot.height() / map.ranks();
  return QPoint(static_cast<int>(x), static_cast<int>(y));
}

// Relative luminance (Rec. 709 weights): how light a colour looks, unlike HSL lightness, which
// ranks saturated orange below dull red.
double luma(const QColor& c) {
  return 0.2126 * c.redF() + 0.7152 * c.greenF() + 0.0722 * c.blueF();
}

struct Agg {
  int64_t count = 0, failed = 0, bytes = 0;
  double seconds = 0, busbw_seconds = 0;
};

}  // namespace

class TestCommViews : public QObject {
  Q_OBJECT
 private slots:
  void emptyModelShowsNothing() {
    net::RunModel model;
    CommHeatMap map;
    map.resize(400, 300);
    map.update(model);
    QCOMPARE(map.ranks(), 0);
    QCOMPARE(map.firstStep(), int64_t{0});
    QCOMPARE(map.lastStep(), int64_t{0});
    QCOMPARE(map.cellSeconds(0, 1), 0.0);
    QVERIFY(!map.cellColor(0, 1).isValid());
    QCOMPARE(map.metric(), net::StepMetric::wait);  // the default
    QCOMPARE(map.csv(), QString("rank,step,wait_seconds\n"));
    QVERIFY(!map.waitsUnknown());  // nothing shown, nothing to explain
    QImage img(map.size(), QImage::Format_ARGB32_Premultiplied);
    map.render(&img);  // paints without data

    CommTable table;
    table.update(model);
    QCOMPARE(table.rowCount(), 0);
    QCOMPARE(table.summaryRowCount(), 0);
  }

  void heatMapCellsAreEachRanksStepSeconds() {
    net::RunModel model;
    Feeder f(model);
    constexpr int kRanks = 4, kSteps = 6;
    std::map<std::pair<int, int>, double> expected;
    for (int s = 1; s <= kSteps; ++s) {
      const double t = kT0 + s;
      for (int r = 0; r < kRanks; ++r) {
        const double a = 0.001 * (r + 1) * s, b = 0.0005 * (kRanks - r);
        f.collective(r, "all_reduce", "dp[0]", 1024, t, a, 5);
        f.collective(r, "all_gather", "tp[" + std::to_string(r % 2) + "]", 512, t + a, b, 5);
        f.step(r, s, t + 0.5, 0.5);
        expected[{r, s}] = a + b;
      }
    }
    CommHeatMap map;
    map.resize(500, 300);
    map.setMetric(net::StepMetric::comm);  // these collectives carry no wait
    map.update(model);
    QCOMPARE(map.ranks(), kRanks);
    QCOMPARE(map.firstStep(), int64_t{1});
    QCOMPARE(map.lastStep(), int64_t{kSteps});
    QCOMPARE(map.steps(), kSteps);
    std::vector<double> values;
    for (const auto& [key, secs] : expected) {
      const auto [r, s] = key;
      QVERIFY2(std::abs(map.cellSeconds(r, s) - secs) < 1e-6 * secs,
               qPrintable(QString("rank %1 step %2: %3 vs %4")
                              .arg(r)
                              .arg(s)
                              .arg(map.cellSeconds(r, s))
                              .arg(secs)));
      QVERIFY(map.cellColor(r, s).isValid());
      values.push_back(secs);
    }
    QCOMPARE(map.cellSeconds(0, 0), 0.0);
    QCOMPARE(map.cellSeconds(kRanks, 1), 0.0);
    QCOMPARE(map.cellSeconds(0, kSteps + 1), 0.0);
    QVERIFY(!map.cellColor(-1, 1).isValid());

    // The scale's top is the 99th percentile of the non-zero cells.
    std::sort(values.begin(), values.end());
    const double top = values[static_cast<size_t>(0.99 * static_cast<double>(values.size() - 1))];
    QVERIFY(std::abs(map.scaleSeconds() - top) < 1e-6 * top);
    // The hottest cell saturates; colours rise in lightness with the seconds.
    QCOMPARE(map.cellColor(kRanks - 1, kSteps), CommHeatMap::scaleColor(1.0));
    QVERIFY(luma(map.cellColor(0, 1)) < luma(map.cellColor(kRanks - 1, kSteps)));
    for (int i = 1; i <= 20; ++i)
      QVERIFY(luma(CommHeatMap::scaleColor(i / 20.0)) >
              luma(CommHeatMap::scaleColor((i - 1) / 20.0)));

    // The drawn pixels are the cells' colours; the tooltip names the cell.
    QImage img(map.size(), QImage::Format_ARGB32_Premultiplied);
    img.fill(Qt::white);
    map.render(&img);
    for (int r = 0; r < kRanks; ++r) {
      for (int s = 1; s <= kSteps; ++s) {
        const QPoint c = cellCenter(map, r, s);
        QCOMPARE(map.cellAt(c), std::make_pair(r, int64_t{s}));
        QCOMPARE(img.pixelColor(c), map.cellColor(r, s));
      }
    }
    const QString tip = map.toolTipAt(cellCenter(map, 2, 3));
    QVERIFY2(tip.startsWith("rank 2, step 3: ") && tip.endsWith(" ms communication"),
             qPrintable(tip));
    const double tip_ms = tip.mid(16, tip.size() - 16 - 17).toDouble();
    QVERIFY2(std::abs(tip_ms - expected[{2, 3}] * 1e3) < 0.01, qPrintable(tip));
    QVERIFY(map.toolTipAt(QPoint(0, 0)).isEmpty());

    const QStringList lines = map.csv().split('\n', Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 1 + kRanks * kSteps);
    QCOMPARE(lines[0], QString("rank,step,communication_seconds"));
    const QStringList row = lines[1 + 1 * kSteps + 2].split(',');  // rank 1, step 3
    QCOMPARE(row[0], QString("1"));
    QCOMPARE(row[1], QString("3"));
    QVERIFY(std::abs(row[2].toDouble() - expected[{1, 3}]) < 1e-6);
  }

  // One model, four metrics: each cell is the sum of that step's events for the metric shown
  // (wait and transfer from the collectives with a known wait, compute from the phases), the
  // tooltip and the CSV name the metric.
  void metricSwitchFollowsTheModel() {
    struct Sums {
      double comm = 0, wait = 0, transfer = 0, compute = 0;
      double of(net::StepMetric m) const {
        switch (m) {
          case net::StepMetric::comm:
            return comm;
          case net::StepMetric::wait:
            return wait;
          case net::StepMetric::transfer:
            return transfer;
          case net::StepMetric::compute:
            return compute;
        }
        return 0;
      }
    };
    net::RunModel model;
    Feeder f(model);
    std::map<std::pair<int, int64_t>, Sums> want;
    constexpr int kRanks = 3, kSteps = 5;
    for (int64_t s = 1; s <= kSteps; ++s) {
      const double t = kT0 + static_cast<double>(s);
      for (int r = 0; r < kRanks; ++r) {
        Sums& w = want[{r, s}];
        const double fwd = 0.001 * (r + 1) * static_cast<double>(s), bwd = 2 * fwd;
        f.phase(r, telemetry::Phase::forward, t, t + fwd);
        f.phase(r, telemetry::Phase::backward, t + fwd, t + fwd + bwd);
        f.phase(r, telemetry::Phase::optimizer, t + 0.3, t + 0.302);
        // Epoch-second spans carry ~1e-7 s of rounding: expect what the events say.
        w.compute += (t + fwd - t) + (t + fwd + bwd - (t + fwd)) + (t + 0.302 - (t + 0.3));
        const double d = 0.004 + 0.001 * r, wait = r == 2 ? 0.0 : 0.002 * (2 - r);
        f.collective(r, "all_reduce", "dp[0]", 1024, t + 0.1, d, 5, true, wait, 2);
        w.comm += d;
        w.wait += wait;
        w.transfer += d - wait;
        f.collective(r, "send", "pp[0]", 64, t + 0.2, 0.0005, 1);  // wait unknown
        w.comm += 0.0005;
        f.step(r, s, t + 0.5, 0.5);
      }
    }
    CommHeatMap map;
    map.resize(500, 300);
    for (net::StepMetric m : {net::StepMetric::transfer, net::StepMetric::compute,
                              net::StepMetric::comm, net::StepMetric::wait}) {
      const QString name = CommHeatMap::metricName(m);
      // Switching alone keeps the figures shown until the next update from the model.
      const double before = map.cellSeconds(1, 2);
      map.setMetric(m);
      QCOMPARE(map.metric(), m);
      QCOMPARE(map.cellSeconds(1, 2), before);
      map.update(model);
      QCOMPARE(map.ranks(), kRanks);
      QCOMPARE(map.lastStep(), int64_t{kSteps});
      QVERIFY(!map.waitsUnknown());
      for (const auto& [key, w] : want) {
        const auto [r, s] = key;
        QVERIFY2(std::abs(map.cellSeconds(r, s) - w.of(m)) < 1e-6,
                 qPrintable(QString("%1: rank %2 step %3: %4 vs %5")
                                .arg(name)
                                .arg(r)
                                .arg(s)
                                .arg(map.cellSeconds(r, s))
                                .arg(w.of(m))));
      }
      const QString tip = map.toolTipAt(cellCenter(map, 1, 4));
      QVERIFY2(tip.startsWith("rank 1, step 4: ") && tip.endsWith(" ms " + name), qPrintable(tip));
      QVERIFY(map.csv().startsWith("rank,step," + name + "_seconds\n"));
    }
    QCOMPARE(CommHeatMap::metricName(net::StepMetric::wait), QString("wait"));
    QCOMPARE(CommHeatMap::metricName(net::StepMetric::comm), QString("communication"));
    // Rank 2 arrives last and never waits; rank 0 waits most.
    QCOMPARE(map.cellSeconds(2, 3), 0.0);
    QVERIFY(map.cellSeconds(0, 3) > map.cellSeconds(1, 3));

    // A run without a single measured wait: wait and transfer say so; compute does not.
    net::RunModel blind;
    Feeder g(blind);
    g.phase(0, telemetry::Phase::forward, kT0, kT0 + 0.01);
    g.collective(0, "all_reduce", "world", 64, kT0 + 0.01, 0.002);
    g.step(0, 1, kT0 + 0.1, 0.1);
    CommHeatMap m2;
    m2.resize(500, 300);
    m2.update(blind);
    QVERIFY(m2.waitsUnknown());
    QCOMPARE(m2.cellSeconds(0, 1), 0.0);
    QImage img(m2.size(), QImage::Format_ARGB32_Premultiplied);
    m2.render(&img);  // paints the note
    m2.setMetric(net::StepMetric::transfer);
    m2.update(blind);
    QVERIFY(m2.waitsUnknown());
    m2.setMetric(net::StepMetric::compute);
    m2.update(blind);
    QVERIFY(!m2.waitsUnknown());
    QVERIFY(std::abs(m2.cellSeconds(0, 1) - 0.01) < 1e-6);
  }

  void windowFollowsTheNewestSteps() {
    net::RunModel model;
    Feeder f(model);
    const int64_t steps = net::CommStats::kWindowSteps + 88;
    for (int64_t s = 1; s <= steps; ++s) {
      for (int r = 0; r < 2; ++r) {
        f.collective(r, "all_reduce", "world", 64, kT0 + s, 0.001 * (r + 1));
        f.step(r, s, kT0 + s + 0.5, 0.5);
      }
    }
    CommHeatMap map;
    map.setMetric(net::StepMetric::comm);
    map.update(model);
    QCOMPARE(map.lastStep(), steps);
    QCOMPARE(map.firstStep(), steps - net::CommStats::kWindowSteps + 1);
    QCOMPARE(map.steps(), static_cast<int>(net::CommStats::kWindowSteps));
    QVERIFY(std::abs(map.cellSeconds(1, steps) - 0.002) < 1e-9);
    QCOMPARE(map.cellSeconds(1, map.firstStep() - 1), 0.0);
  }

  // Ranks 0..6 wait 49 ms per step for rank 7, which waits none: rank 7 is the cold row in wait
  // (the default) and in all communication, and the hot one in compute.
  void stragglerIsTheColdRow() {
    net::RunModel model;
    feedStraggler(model, 20, 0.050, 0.001);
    CommHeatMap map;
    map.resize(600, 300);
    map.setMetric(net::StepMetric::compute);
    map.update(model);
    for (int64_t s = 1; s <= 20; ++s)
      for (int r = 0; r < 7; ++r) QVERIFY(luma(map.cellColor(7, s)) > luma(map.cellColor(r, s)));
    map.setMetric(net::StepMetric::comm);
    map.update(model);
    QVERIFY(std::abs(map.scaleSeconds() - 0.050) < 1e-6);
    map.setMetric(net::StepMetric::wait);
    map.update(model);
    QCOMPARE(map.ranks(), 8);
    QCOMPARE(map.lastStep(), int64_t{20});
    QVERIFY(std::abs(map.scaleSeconds() - 0.049) < 1e-6);
    QCOMPARE(map.cellSeconds(7, 5), 0.0);
    for (int64_t s = 1; s <= 20; ++s) {
      const QColor cold = map.cellColor(7, s);
      for (int r = 0; r < 7; ++r) {
        const QColor hot = map.cellColor(r, s);
        QVERIFY2(luma(hot) - luma(cold) > 0.6,
                 qPrintable(QString("step %1: rank %2 luminance %3, rank 7 %4")
                                .arg(s)
                                .arg(r)
                                .arg(luma(hot))
                                .arg(luma(cold))));
        // Hot is the yellow end of the scale, cold the near-black end.
        QVERIFY(hot.redF() + hot.greenF() > 1.5);
        QVERIFY(cold.redF() + cold.greenF() + cold.blueF() < 0.3);
      }
    }
    if (qEnvironmentVariableIsSet("SHARDLAB_SAVE_VIEWS")) {  // for eyeballing the scale
      map.grab().save(QDir::temp().filePath("shardlab-straggler.png"));
    }
  }

  // 1,024 ranks drawn into far fewer pixel rows: the one straggler (rank 613, never waiting)
  // still shows as a dark line across the drawn plot, wherever its row falls.
  void stragglerSurvivesDownscaling() {
    net::RunModel model;
    Feeder f(model);
    constexpr int kRanks = 1024, kStraggler = 613;
    for (int s = 1; s <= 30; ++s) {
      const double t = kT0 + s * 0.2;
      for (int r = 0; r < kRanks; ++r) {
        const double d = r == kStraggler ? 0.001 : 0.050;
        f.collective(r, "all_reduce", "world", 1 << 20, t + 0.1 - d, d, 20.0);
        f.step(r, s, t + 0.11, 0.2);
      }
    }
    CommHeatMap map;
    map.resize(600, 400);
    map.show();
    map.setMetric(net::StepMetric::comm);  // no waits measured in these events
    map.update(model);
    const QImage drawn = map.grab().toImage();
    const QRect plot = map.plotRect();
    QVERIFY(plot.height() < kRanks / 2);  // many ranks per pixel row
    const int y =
        plot.top() + static_cast<int>(static_cast<double>(kStraggler) * plot.height() / kRanks);
    int dark = 0, hot = 0;
    for (int x = plot.left() + 2; x < plot.right() - 2; x += 3) {
      bool any_dark = false;
      for (int dy = -1; dy <= 1; ++dy)  // the row, give or take the rounding of the scaling
        any_dark = any_dark || luma(drawn.pixelColor(x, y + dy)) < 0.1;
      dark += any_dark ? 1 : 0;
      hot += luma(drawn.pixelColor(x, plot.top() + plot.height() / 4)) > 0.6 ? 1 : 0;
    }
    const int columns = (plot.width() - 4) / 3;
    QVERIFY2(dark > columns * 9 / 10, qPrintable(QString("%1 of %2").arg(dark).arg(columns)));
    QVERIFY2(hot > columns * 9 / 10, qPrintable(QString("%1 of %2").arg(hot).arg(columns)));
  }

  void tableHasOneRowPerOpAndGroup() {
    net::RunModel model;
    Feeder f(model);
    std::map<std::pair<std::string, std::string>, Agg> expected;
    auto record = [&](int rank, const std::string& op, const std::string& group, int64_t bytes,
                      double start, double duration, double busbw, bool ok) {
      f.collective(rank, op, group, bytes, start, duration, busbw, ok);
      Agg& a = expected[{op, group}];
      ++a.count;
      a.failed += ok ? 0 : 1;
      a.bytes += bytes;
      a.seconds += duration;
      a.busbw_seconds += busbw * duration;
    };
    // 8 ranks: dp groups dp[2] (ranks 0-3) and dp[10] (ranks 4-7), tp pairs, one pp send.
    for (int s = 1; s <= 3; ++s) {
      const double t = kT0 + s;
      for (int r = 0; r < 8; ++r) {
        record(r, "all_reduce", r < 4 ? "dp[2]" : "dp[10]", 3 << 20, t, 0.004 + 0.001 * r, 10 + r,
               true);
        record(r, "all_gather", "tp[" + std::to_string(r / 2) + "]", 1 << 16, t + 0.02, 0.002, 4,
               true);
        if (r == 0) record(r, "send", "pp[0]", 1000, t + 0.03, 0.001, 1, s != 2);
        f.step(r, s, t + 0.5, 0.5);
      }
    }
    CommTable table;
    table.resize(800, 500);
    table.update(model);
    QCOMPARE(table.rowCount(), static_cast<int>(expected.size()));

    // Initially by op, then group in natural order (dp[2] before dp[10]).
    QCOMPARE(table.cell(0, CommTable::Op), QString("all_gather"));
    QCOMPARE(table.cell(0, CommTable::Group), QString("tp[0]"));
    QCOMPARE(table.cell(4, CommTable::Op), QString("all_reduce"));
    QCOMPARE(table.cell(4, CommTable::Group), QString("dp[2]"));
    QCOMPARE(table.cell(5, CommTable::Group), QString("dp[10]"));
    QCOMPARE(table.cell(6, CommTable::Op), QString("send"));

    int64_t total_count = 0;
    for (int row = 0; row < table.rowCount(); ++row) {
      const std::pair<std::string, std::string> key{
          table.cell(row, CommTable::Op).toStdString(),
          table.cell(row, CommTable::Group).toStdString()};
      QVERIFY2(expected.count(key), qPrintable(table.cell(row, CommTable::Group)));
      const Agg& a = expected[key];
      QCOMPARE(table.cell(row, CommTable::Count), QString::number(a.count));
      QCOMPARE(table.cell(row, CommTable::Failed), QString::number(a.failed));
      QCOMPARE(table.cell(row, CommTable::TotalSeconds), QString::number(a.seconds, 'f', 3));
      QCOMPARE(table.cell(row, CommTable::MeanMs),
               QString::number(a.seconds / static_cast<double>(a.count) * 1e3, 'f', 3));
      QCOMPARE(table.cell(row, CommTable::BusBw),
               QString::number(a.busbw_seconds / a.seconds, 'f', 2));
      total_count += a.count;
    }
    // Human bytes: 4 ranks x 3 steps x 3 MiB = 36.0 MiB; 2 ranks x 3 x 64 KiB = 384.0 KiB.
    QCOMPARE(table.cell(4, CommTable::Bytes), QString("36.0 MiB"));
    QCOMPARE(table.cell(0, CommTable::Bytes), QString("384.0 KiB"));
    QCOMPARE(table.cell(6, CommTable::Bytes), QString("2.9 KiB"));  // 3 x 1000 B
    QCOMPARE(table.cell(6, CommTable::Failed), QString("1"));

    // Sorting by a numeric column sorts by value.
    table.sortBy(CommTable::TotalSeconds, Qt::DescendingOrder);
    QCOMPARE(table.cell(0, CommTable::Group), QString("dp[10]"));  // the slower ranks 4-7
    for (int row = 1; row < table.rowCount(); ++row)
      QVERIFY(table.cell(row - 1, CommTable::TotalSeconds).toDouble() >=
              table.cell(row, CommTable::TotalSeconds).toDouble());
    table.sortBy(CommTable::Count, Qt::AscendingOrder);
    QCOMPARE(table.cell(0, CommTable::Op), QString("send"));

    // Per kind: tp, pp, dp (no world), then the total.
    std::map<std::string, Agg> kinds;
    for (const auto& [key, a] : expected) {
      Agg& k = kinds[key.second.substr(0, key.second.find('['))];
      k.count += a.count;
      k.failed += a.failed;
      k.seconds += a.seconds;
      k.bytes += a.bytes;
    }
    QCOMPARE(table.summaryRowCount(), 4);
    const std::vector<std::string> order = {"tp", "pp", "dp"};
    for (int row = 0; row < 3; ++row) {
      const Agg& k = kinds[order[static_cast<size_t>(row)]];
      QCOMPARE(table.summaryCell(row, CommTable::Op), QString("all"));
      QCOMPARE(table.summaryCell(row, CommTable::Group),
               QString::fromStdString(order[static_cast<size_t>(row)]));
      QCOMPARE(table.summaryCell(row, CommTable::Count), QString::number(k.count));
      QCOMPARE(table.summaryCell(row, CommTable::Failed), QString::number(k.failed));
      QCOMPARE(table.summaryCell(row, CommTable::TotalSeconds), QString::number(k.seconds, 'f', 3));
    }
    QCOMPARE(table.summaryCell(3, CommTable::Group), QString("total"));
    QCOMPARE(table.summaryCell(3, CommTable::Count), QString::number(total_count));
    QCOMPARE(table.summaryCell(3, CommTable::Failed), QString("1"));

    const QStringList lines = table.csv().split('\n', Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 1 + table.rowCount() + table.summaryRowCount());
    QCOMPARE(lines[0],
             QString("op,group,count,failed,total_seconds,mean_ms,bytes,mean_busbw_gbps"));
    QVERIFY2(lines[1].startsWith("send,pp[0],3,1,"), qPrintable(lines[1]));  // display order
    QVERIFY2(lines[1].contains(",3000,"), qPrintable(lines[1]));             // exact bytes
    QVERIFY2(lines.last().startsWith(QString("all,total,%1,1,").arg(total_count)),
             qPrintable(lines.last()));
  }

  // The app at scale: one heat-map redraw (copy from the model + synchronous paint) at 1,024 ranks
  // x 200 steps, shown offscreen at 1200x900. Reports, does not gate.
  void benchmarkHeatMapUpdateAndRepaint1024() {
    const net::RunModel& model = bigModel();
    CommHeatMap map;
    map.resize(1200, 900);
    map.show();
    QVERIFY(QTest::qWaitForWindowExposed(&map));
    map.setMetric(net::StepMetric::comm);
    map.update(model);
    QCOMPARE(map.ranks(), 1024);
    QCOMPARE(map.steps(), 200);
    int iterations = 0;
    QElapsedTimer timer;
    timer.start();
    QBENCHMARK {
      map.update(model);
      map.repaint();
      ++iterations;
    }
    const double ms = static_cast<double>(timer.nsecsElapsed()) / 1e6 / std::max(iterations, 1);
    qInfo(
        "CommHeatMap update(model) + repaint(), 1024 ranks x 200 steps at 1200x900: %.3f ms per "
        "iteration (%d iterations, incl. benchmark overhead)",
        ms, iterations);
    QVERIFY(map.cellSeconds(1023, 200) > 0);
    if (qEnvironmentVariableIsSet("SHARDLAB_SAVE_VIEWS"))
      map.grab().save(QDir::temp().filePath("shardlab-heatmap-1024.png"));
  }

  void benchmarkHeatMapRepaintOnly1024() {
    const net::RunModel& model = bigModel();
    CommHeatMap map;
    map.resize(1200, 900);
    map.show();
    QVERIFY(QTest::qWaitForWindowExposed(&map));
    map.setMetric(net::StepMetric::comm);
    map.update(model);
    int iterations = 0;
    QElapsedTimer timer;
    timer.start();
    QBENCHMARK {
      map.repaint();
      ++iterations;
    }
    const double ms = static_cast<double>(timer.nsecsElapsed()) / 1e6 / std::max(iterations, 1);
    qInfo(
        "CommHeatMap repaint() alone, 1024 ranks x 200 steps at 1200x900: %.3f ms per iteration "
        "(%d iterations)",
        ms, iterations);
  }

  void benchmarkCommTableUpdate1024() {
    const net::RunModel& model = bigModel();
    CommTable table;
    table.resize(900, 600);
    table.show();
    QVERIFY(QTest::qWaitForWindowExposed(&table));
    QBENCHMARK {
      table.update(model);
      table.repaint();
    }
    QCOMPARE(table.rowCount(), 128);  // all_reduce on dp[0] .. dp[127]
  }
};

QTEST_MAIN(TestCommViews)
#include "tst_comm_views.moc"
