// The rank grid, offscreen: every rank gets its own cell where Topology says it lives (tp side by
// side, pp stages in separate bands), hovering highlights exactly Topology's groups (also in the
// pixels), the sync view marks the communicating group and the flags, cells coloured by a share
// of step time with a legend and the diagnosis in the tooltips, cells showing each rank's step,
// memory and wait share from a run model fed hand-made events (fewer lines in smaller cells; the
// grids at 8 and 64 ranks saved to <build>/screenshots/rank-grid-{8,64}.png), and a 1,024-rank
// redraw is benchmarked.
#include <QtTest>

#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QImage>
#include <QMouseEvent>

#include <cmath>
#include <limits>
#include <vector>

#include "gui/rank_grid.h"
#include "net/run_model.h"
#include "tests/common/telemetry_events.h"

using namespace shardlab;
using namespace shardlab::gui;

namespace {

Topology make(int pp, int tp, int dp) {
  return Topology::make(TopologyConfig{pp, tp, dp}, pp * tp * dp);
}

QImage renderGrid(RankGrid& g) {
  QImage img(g.size(), QImage::Format_ARGB32_Premultiplied);
  img.fill(Qt::white);
  g.render(&img);
  return img;
}

// A pp x tp x dp run as the collector holds it: each rank's HELLO, a MEMORY event (rank r holds
// r + 1.5 MiB in all: params r + 1 MiB, grads 512 KiB), then steps 1 to 3 of 1 s, each with an
// all-reduce of 0.8 s in which rank r waited (r % 8) / 10 s (step 1 is warm-up, left out of the
// wait share).
net::RunModel run_of(int pp, int tp, int dp) {
  namespace tl = shardlab::telemetry;
  net::RunModel run;
  const int world = pp * tp * dp;
  for (int r = 0; r < world; ++r)
    run.add(net::Message{test::grid_hello("job", r, world, pp, tp, dp)});
  test::EventFeeder feed(run);
  for (int r = 0; r < world; ++r) {
    tl::MemoryEvent mem;
    mem.current[static_cast<size_t>(MemCategory::params)] = (r + 1) * int64_t{1 << 20};
    mem.current[static_cast<size_t>(MemCategory::grads)] = 512 * 1024;
    mem.peak = mem.current;
    feed.add(r, 1000.0, mem);
  }
  for (int64_t step = 1; step <= 3; ++step) {
    const double t = 1000.0 + static_cast<double>(step);
    for (int r = 0; r < world; ++r) {
      tl::CollectiveEvent c;
      c.op = "all_reduce";
      c.group = "dp[0]";
      c.bytes = 1 << 20;
      c.start = t - 0.9;
      c.duration = 0.8;
      c.wait = (r % 8) / 10.0;
      c.last_rank = -1;
      feed.add(r, t - 0.1, c);
      feed.add(r, t, test::make_step(step, 2.0, 1.0));
    }
  }
  return run;
}

void save(RankGrid& g, const QString& name) {
  QDir().mkpath(QStringLiteral(SHARDLAB_BINARY_DIR "/screenshots"));
  const QString path = QStringLiteral(SHARDLAB_BINARY_DIR "/screenshots/%1.png").arg(name);
  QVERIFY2(renderGrid(g).save(path), qPrintable(path));
}

}  // namespace

class TestRankGrid : public QObject {
  Q_OBJECT
 private slots:
  void layout_data() {
    QTest::addColumn<int>("pp");
    QTest::addColumn<int>("tp");
    QTest::addColumn<int>("dp");
    QTest::newRow("1x1x1") << 1 << 1 << 1;
    QTest::newRow("2x2x2") << 2 << 2 << 2;
    QTest::newRow("4x2x3") << 4 << 2 << 3;
    QTest::newRow("1x8x1") << 1 << 8 << 1;
  }

  void layout() {
    QFETCH(int, pp);
    QFETCH(int, tp);
    QFETCH(int, dp);
    const Topology topo = make(pp, tp, dp);
    RankGrid g;
    g.setTopology(topo);
    g.resize(640, 400);
    const QRect inside = g.rect();
    const int n = topo.world();
    QCOMPARE(g.world(), n);
    for (int r = 0; r < n; ++r) {
      const QRect c = g.cellRect(r);
      QVERIFY2(!c.isEmpty(), qPrintable(QString("rank %1").arg(r)));
      QVERIFY2(inside.contains(c), qPrintable(QString("rank %1 outside the widget").arg(r)));
      QCOMPARE(g.rankAt(c.center()), r);
      for (int o = r + 1; o < n; ++o)
        QVERIFY2(!c.intersects(g.cellRect(o)), qPrintable(QString("%1 overlaps %2").arg(r).arg(o)));
    }
    QCOMPARE(g.rankAt(QPoint(0, 0)), -1);  // margin
    QVERIFY(g.cellRect(-1).isEmpty() && g.cellRect(n).isEmpty());

    // tp neighbours side by side; pp stages in separate, ordered row bands.
    for (int r = 0; r < n; ++r) {
      const Coord c = topo.coord(r);
      if (c.tp + 1 < tp) {
        const int next = topo.rank(Coord{c.pp, c.tp + 1, c.dp});
        QCOMPARE(g.cellRect(next).top(), g.cellRect(r).top());
        QVERIFY(g.cellRect(next).left() > g.cellRect(r).right());
      }
      if (c.pp + 1 < pp) {
        // Every cell of stage pp+1 lies below every cell of stage pp.
        for (int o = 0; o < n; ++o)
          if (topo.coord(o).pp == c.pp + 1) QVERIFY(g.cellRect(o).top() > g.cellRect(r).bottom());
      }
    }
    QVERIFY(g.sizeHint().isValid());
  }

  void hoverHighlightsTopologyGroups() {
    const Topology topo = make(4, 2, 3);
    RankGrid g;
    g.setTopology(topo);
    g.resize(640, 400);
    QCOMPARE(g.hoveredRank(), -1);
    QVERIFY(g.highlighted(ParallelDim::Pp).empty());
    QSignalSpy spy(&g, &RankGrid::rankHovered);
    for (int r = 0; r < topo.world(); ++r) {
      g.setHoveredRank(r);
      QCOMPARE(g.hoveredRank(), r);
      QCOMPARE(g.highlighted(ParallelDim::Tp), topo.tp_group(r));
      QCOMPARE(g.highlighted(ParallelDim::Pp), topo.pp_group(r));
      QCOMPARE(g.highlighted(ParallelDim::Dp), topo.dp_group(r));
      for (int o = 0; o < topo.world(); ++o) {
        QCOMPARE(g.isHighlighted(ParallelDim::Tp, o), topo.tp_color(o) == topo.tp_color(r));
        QCOMPARE(g.isHighlighted(ParallelDim::Pp, o), topo.pp_color(o) == topo.pp_color(r));
        QCOMPARE(g.isHighlighted(ParallelDim::Dp, o), topo.dp_color(o) == topo.dp_color(r));
      }
    }
    QCOMPARE(spy.count(), topo.world());
    g.setHoveredRank(topo.world());  // out of range clears
    QCOMPARE(g.hoveredRank(), -1);
    QVERIFY(g.highlighted(ParallelDim::Tp).empty());
  }

  void mouseMoveHoversTheCell() {
    const Topology topo = make(2, 2, 2);
    RankGrid g;
    g.setTopology(topo);
    g.resize(400, 300);
    QSignalSpy spy(&g, &RankGrid::rankHovered);
    const QPointF at = g.cellRect(5).center();
    QMouseEvent move(QEvent::MouseMove, at, g.mapToGlobal(at), Qt::NoButton, Qt::NoButton,
                     Qt::NoModifier);
    QApplication::sendEvent(&g, &move);
    QCOMPARE(g.hoveredRank(), 5);
    QCOMPARE(spy.count(), 1);
    QCOMPARE(spy.at(0).at(0).toInt(), 5);
    QMouseEvent off(QEvent::MouseMove, QPointF(0, 0), g.mapToGlobal(QPointF(0, 0)), Qt::NoButton,
                    Qt::NoButton, Qt::NoModifier);
    QApplication::sendEvent(&g, &off);
    QCOMPARE(g.hoveredRank(), -1);
    QCOMPARE(spy.count(), 2);
  }

  void hoverIsDrawn() {
    const Topology topo = make(2, 2, 2);
    RankGrid g;
    g.setTopology(topo);
    g.resize(400, 300);
    const int hovered = 1;
    g.setHoveredRank(hovered);
    const QImage img = renderGrid(g);
    const QColor pp = RankGrid::highlightColor(ParallelDim::Pp);
    auto leftEdge = [&](int r) {
      const QRect c = g.cellRect(r);
      return img.pixelColor(c.left(), c.center().y());
    };
    // pp group of 1 is {1, 5}: both carry the pp ring; 0 (same tp group, other pp group) doesn't.
    QCOMPARE(topo.pp_group(hovered), (std::vector<int>{1, 5}));
    QCOMPARE(leftEdge(1), pp);
    QCOMPARE(leftEdge(5), pp);
    QVERIFY(leftEdge(0) != pp);
    QVERIFY(leftEdge(6) != pp);
    // The dp ring sits just inside the pp ring on dp members (dp group of 1 is {1, 3}).
    const int ring = std::clamp(g.cellRect(3).width() / 9, 1, 3);
    const QRect c3 = g.cellRect(3);
    QCOMPARE(img.pixelColor(c3.left() + ring, c3.center().y()),
             RankGrid::highlightColor(ParallelDim::Dp));
    QVERIFY(img.pixelColor(c3.left(), c3.center().y()) != pp);
    // Without hover, nothing carries a ring.
    g.setHoveredRank(-1);
    const QImage plain = renderGrid(g);
    const QRect c5 = g.cellRect(5);
    QVERIFY(plain.pixelColor(c5.left(), c5.center().y()) != pp);
  }

  void communicatingGroupIsMarked() {
    const Topology topo = make(4, 2, 3);
    RankGrid g;
    g.setTopology(topo);
    g.resize(640, 400);
    QVERIFY(g.setCommunicating("dp[1]"));
    QCOMPARE(g.communicating(), std::string("dp[1]"));
    int marked = 0;
    for (int r = 0; r < topo.world(); ++r) {
      QCOMPARE(g.isCommunicating(r), topo.dp_color(r) == 1);
      marked += g.isCommunicating(r);
    }
    QCOMPARE(marked, topo.dp());
    // The marker is drawn: a bar along the bottom of a member's cell.
    const QImage img = renderGrid(g);
    const int member = topo.world_rank(ParallelDim::Dp, 1, 0);
    const QRect c = g.cellRect(member);
    QCOMPARE(img.pixelColor(c.center().x(), c.bottom()), RankGrid::communicatingColor());

    QVERIFY(g.setCommunicating("tp[5]"));
    for (int r = 0; r < topo.world(); ++r) QCOMPARE(g.isCommunicating(r), topo.tp_color(r) == 5);
    QVERIFY(g.setCommunicating("world"));
    for (int r = 0; r < topo.world(); ++r) QVERIFY(g.isCommunicating(r));
    QVERIFY(!g.setCommunicating("dp[99]"));
    QVERIFY(g.communicating().empty());
    for (int r = 0; r < topo.world(); ++r) QVERIFY(!g.isCommunicating(r));
  }

  void flagsAreRecordedAndDrawn() {
    const Topology topo = make(2, 2, 2);
    RankGrid g;
    g.setTopology(topo);
    g.resize(400, 300);
    g.setRankFlag(3, RankGrid::Flag::Straggler);
    g.setRankFlag(6, RankGrid::Flag::Silent);
    g.setRankFlag(7, RankGrid::Flag::Failed);
    g.setRankFlag(99, RankGrid::Flag::Failed);  // ignored
    QCOMPARE(g.rankFlag(3), RankGrid::Flag::Straggler);
    QCOMPARE(g.rankFlag(6), RankGrid::Flag::Silent);
    QCOMPARE(g.rankFlag(7), RankGrid::Flag::Failed);
    QCOMPARE(g.rankFlag(0), RankGrid::Flag::None);
    const QImage img = renderGrid(g);
    const QPoint corner(1, 1);
    QCOMPARE(img.pixelColor(g.cellRect(7).topLeft() + corner),
             RankGrid::flagColor(RankGrid::Flag::Failed));
    QCOMPARE(img.pixelColor(g.cellRect(3).topLeft() + corner),
             RankGrid::flagColor(RankGrid::Flag::Straggler));
    QCOMPARE(img.pixelColor(g.cellRect(0).topLeft() + corner),
             RankGrid::groupFillColor(topo.tp_color(0)));
    g.clearFlags();
    QCOMPARE(g.rankFlag(7), RankGrid::Flag::None);
    g.setRankFlag(7, RankGrid::Flag::Failed);
    g.setTopology(make(1, 8, 1));  // a new topology starts clean
    QCOMPARE(g.rankFlag(7), RankGrid::Flag::None);
  }

  // Shares colour the cells on a scale whose top is the smallest of 10/25/50/100% that holds them
  // all; ranks without a figure keep their group colour; the legend sits under every cell; the
  // tooltip gives the share and the note.
  void sharesColourTheCellsWithALegend() {
    const Topology topo = make(2, 2, 2);
    RankGrid g;
    g.setTopology(topo);
    g.resize(400, 300);
    QVERIFY(!g.hasShares());
    QVERIFY(g.legendRect().isNull());
    const QRect plain = g.cellRect(0);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const std::vector<double> shares = {0.2, 0.15, 0.0, 0.05, nan, -1, 0.1, 0.125};
    g.setShares(shares, "wait", "of step time, last 20 steps");
    QVERIFY(g.hasShares());
    QCOMPARE(g.shareScale(), 0.25);
    QCOMPARE(g.shareLabel(), QString("wait"));
    QCOMPARE(g.rankShare(0), 0.2);
    QVERIFY(std::isnan(g.rankShare(4)));
    QVERIFY(std::isnan(g.rankShare(99)));
    const QImage img = renderGrid(g);
    const QPoint inside(2, 2);  // off the label, the bar and the flag corner
    for (int r = 0; r < topo.world(); ++r) {
      const double s = shares[static_cast<size_t>(r)];
      const QColor want = std::isfinite(s) && s >= 0 ? RankGrid::shareColor(s / 0.25)
                                                     : RankGrid::groupFillColor(topo.tp_color(r));
      QCOMPARE(g.cellFill(r), want);
      QCOMPARE(img.pixelColor(g.cellRect(r).bottomRight() - inside), want);
    }
    // More share is darker; the scale's ends are the palette's.
    QVERIFY(g.cellFill(0).lightnessF() < g.cellFill(3).lightnessF());
    QVERIFY(RankGrid::shareColor(1.0).lightnessF() < RankGrid::shareColor(0.0).lightnessF());
    QCOMPARE(RankGrid::shareColor(2.0), RankGrid::shareColor(1.0));
    // The legend: a strip under the cells (which made room for it), holding the scale's colours.
    const QRect legend = g.legendRect();
    QVERIFY(!legend.isNull());
    QVERIFY(QRect(QPoint(0, 0), g.size()).contains(legend));
    for (int r = 0; r < topo.world(); ++r) QVERIFY(g.cellRect(r).bottom() < legend.top());
    QVERIFY(g.cellRect(0).height() <= plain.height());
    bool light = false, dark = false;
    for (int x = legend.left(); x <= legend.right(); ++x) {
      const QColor c = img.pixelColor(x, legend.center().y());
      light = light || c == RankGrid::shareColor(0.0);
      dark = dark || c == RankGrid::shareColor(1.0);
    }
    QVERIFY(light && dark);
    // Tooltips: the share in words, then the note.
    QVERIFY2(g.rankToolTip(0).contains("wait 20% of step time, last 20 steps"),
             qPrintable(g.rankToolTip(0)));
    QVERIFY(!g.rankToolTip(4).contains("wait"));
    g.setRankNote(1, "stage 1 is the bottleneck: busy 88% against 51% on stage 0");
    g.setRankFlag(1, RankGrid::Flag::Straggler, "rank 1 is slow");
    const QStringList tip = g.rankToolTip(1).split('\n');
    QCOMPARE(tip.size(), 4);
    QCOMPARE(tip[1], QString("straggler: rank 1 is slow"));
    QVERIFY(tip[2].startsWith("wait 15%"));
    QCOMPARE(tip[3], g.rankNote(1));
    // The flag corner still shows over a share colour.
    QCOMPARE(renderGrid(g).pixelColor(g.cellRect(1).topLeft() + QPoint(1, 1)),
             RankGrid::flagColor(RankGrid::Flag::Straggler));

    // Other scales: the smallest top that holds the largest share.
    g.setShares({0.05, 0.01}, "compute");
    QCOMPARE(g.shareScale(), 0.10);
    g.setShares({0.3}, "compute");
    QCOMPARE(g.shareScale(), 0.50);
    g.setShares({1.3, 0.9}, "compute");  // overlapped compute and communication: clamped
    QCOMPARE(g.shareScale(), 1.0);
    QCOMPARE(g.cellFill(0), RankGrid::shareColor(1.0));
    // Back to the group colours, the legend gone; a new topology starts without shares or notes.
    g.setShares({});
    QVERIFY(!g.hasShares());
    QVERIFY(g.legendRect().isNull());
    QCOMPARE(g.cellFill(0), RankGrid::groupFillColor(topo.tp_color(0)));
    QCOMPARE(g.cellRect(0), plain);
    g.setShares({0.5}, "wait");
    g.setTopology(make(1, 8, 1));
    QVERIFY(!g.hasShares());
    QVERIFY(g.rankNote(1).isEmpty());
  }

  // During a run each cell says its rank's step, memory and wait share: at 8 ranks in the grid's
  // size in the default 1600 x 1000 window (about 680 x 420) all three under the number; at 64
  // ranks in the same size fewer lines, each a leading part of the same list; in tiny cells none.
  void cellsShowStepMemoryAndWait() {
    RankGrid g;
    g.setTopology(make(2, 2, 2));
    g.resize(680, 420);
    QCOMPARE(g.cellLines(3), QStringList{"3"});  // before the run: the number alone
    g.setFigures(run_of(2, 2, 2));
    const QStringList want[8] = {
        {"0", "step 3", "1.5 MiB", "wait 0%"},  {"1", "step 3", "2.5 MiB", "wait 10%"},
        {"2", "step 3", "3.5 MiB", "wait 20%"}, {"3", "step 3", "4.5 MiB", "wait 30%"},
        {"4", "step 3", "5.5 MiB", "wait 40%"}, {"5", "step 3", "6.5 MiB", "wait 50%"},
        {"6", "step 3", "7.5 MiB", "wait 60%"}, {"7", "step 3", "8.5 MiB", "wait 70%"}};
    for (int r = 0; r < 8; ++r) QCOMPARE(g.cellLines(r), want[r]);
    QCOMPARE(g.rankFigures(3).step, std::optional<int64_t>(3));
    QCOMPARE(g.rankFigures(3).memory, std::optional<int64_t>(4718592));
    g.setRankFlag(5, RankGrid::Flag::Straggler);
    save(g, QStringLiteral("rank-grid-8"));

    // 64 ranks in the same size: smaller cells, fewer lines, the number always first.
    g.setTopology(make(4, 4, 4));
    g.setFigures(run_of(4, 4, 4));
    const QStringList full = {"13", "step 3", "14.5 MiB", "wait 50%"};
    const QStringList shown = g.cellLines(13);
    QVERIFY2(!shown.isEmpty() && shown.size() < full.size(), qPrintable(shown.join('|')));
    QCOMPARE(shown, full.mid(0, shown.size()));
    for (int r = 0; r < 64; ++r) QCOMPARE(g.cellLines(r).value(0), QString::number(r));
    save(g, QStringLiteral("rank-grid-64"));
    // A tiny grid: no text at all.
    g.resize(160, 100);
    QVERIFY(g.cellLines(13).isEmpty());
    // A rank that reported nothing keeps the number alone.
    g.resize(680, 420);
    std::vector<RankGrid::Figures> figures(64);
    figures[2].step = 7;
    g.setFigures(figures);
    QCOMPARE(g.cellLines(13), QStringList{"13"});
    QCOMPARE(g.cellLines(2).value(1), QString("step 7"));
  }

  // The app's scale goal: redrawing a 1,024-rank grid stays under 50 ms. Reports, does not gate.
  void benchmarkRedraw1024() {
    const Topology topo = make(8, 8, 16);
    QCOMPARE(topo.world(), 1024);
    RankGrid g;
    g.setTopology(topo);
    g.resize(1600, 1000);
    g.setHoveredRank(517);
    g.setCommunicating("dp[3]");
    g.setRankFlag(9, RankGrid::Flag::Straggler);
    std::vector<double> shares(1024);
    for (size_t r = 0; r < shares.size(); ++r) shares[r] = static_cast<double>(r % 37) / 100.0;
    g.setShares(shares, "wait", "of step time, last 20 steps");  // as during a run
    QImage img(1600, 1000, QImage::Format_ARGB32_Premultiplied);
    img.fill(Qt::white);
    int iterations = 0;
    QElapsedTimer timer;
    timer.start();
    QBENCHMARK {
      g.render(&img);
      ++iterations;
    }
    const double ms = static_cast<double>(timer.nsecsElapsed()) / 1e6 / std::max(iterations, 1);
    qInfo(
        "RankGrid redraw, 1024 ranks at 1600x1000, cell %d px: %.3f ms per iteration (%d "
        "iterations, incl. benchmark overhead)",
        g.cellSize(), ms, iterations);
    // The render happened: the middle of rank 0's cell carries its group fill, not the backdrop.
    const QRect c = g.cellRect(1023);
    QVERIFY(!c.isEmpty());
    QVERIFY(img.pixelColor(c.center()) != RankGrid::backgroundColor());
    QVERIFY(img.pixelColor(c.center()) != QColor(Qt::white));
  }

  // The flags' and the group rings' colours are the palette both front ends read
  // (engine/telemetry/palette.h), the web page's too: written out here.
  void flagAndRingColoursAreTheSharedPalettes() {
    QCOMPARE(RankGrid::flagColor(RankGrid::Flag::Straggler), QColor(0xf0, 0xaf, 0x00));
    QCOMPARE(RankGrid::flagColor(RankGrid::Flag::Failed), QColor(0xd6, 0x27, 0x28));
    QCOMPARE(RankGrid::flagColor(RankGrid::Flag::Silent), QColor(0x64, 0x64, 0x64));
    QVERIFY(!RankGrid::flagColor(RankGrid::Flag::None).isValid());
    QCOMPARE(RankGrid::highlightColor(ParallelDim::Tp), QColor(0xff, 0x6e, 0x00));
    QCOMPARE(RankGrid::highlightColor(ParallelDim::Dp), QColor(0x00, 0x50, 0xff));
    QCOMPARE(RankGrid::highlightColor(ParallelDim::Pp), QColor(0xc8, 0x00, 0xc8));
  }
};

QTEST_MAIN(TestRankGrid)
#include "tst_rank_grid.moc"
