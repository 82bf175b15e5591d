// The "Who holds what" view, offscreen, from REAL runs of resources/jobs/toy.json (a
// 1,124-parameter GPT on 4 thread ranks, run by the app's RunController) under zero2 and fsdp, and
// from a model of an old recording (HELLO, STEP and MEMORY only):
//   (a) every rank's lanes (params, grads, one per optimizer state array) draw exactly the ranges
//       its LAYOUT event holds, at axis.left + b / total * axis.width (within 1 px);
//   (b) the grabbed image has the lane's palette colour at the middle of each drawn range and not
//       in the middle of a gap of at least 4 px outside the held ranges;
//   (c) what is drawn agrees with the strategies' definitions (ZeRO paper section 5), written here
//       independently of the view: zero2 keeps the whole parameters on every rank and shards
//       gradients and optimizer state (the 4 ranks' lanes disjoint, together [0, total)); fsdp
//       shards all three.
// An old recording draws no lanes and says "Layout unknown". 64 ranks: every strip stacked without
// overlap, no text cut. The images go to <build>/screenshots/app-holdings-*.png.
#include <QtTest>

#include <QCheckBox>
#include <QDir>
#include <QImage>
#include <QPushButton>
#include <QTemporaryDir>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "engine/job/job_spec.h"
#include "engine/telemetry/palette.h"
#include "gui/holdings_view.h"
#include "gui/run_controller.h"
#include "gui/step_scrubber.h"
#include "net/run_model.h"
#include "tests/common/telemetry_events.h"

using namespace shardlab;
using namespace shardlab::gui;
using Ranges = std::vector<std::pair<int64_t, int64_t>>;

namespace {

constexpr int kWidth = 1100;

QColor paletteOf(MemCategory c) {
  return QColor::fromString(
      QLatin1StringView(telemetry::palette_colour(c).data(), telemetry::palette_colour(c).size()));
}

Ranges toPairs(const std::vector<telemetry::LayoutRange>& rs) {
  Ranges out;
  for (const auto& r : rs) out.emplace_back(r.begin, r.end);
  return out;
}

// Each element of [0, total) in exactly one of the lists.
bool partition(const std::vector<Ranges>& lists, int64_t total, QString& why) {
  std::vector<int> count(static_cast<size_t>(total), 0);
  for (const Ranges& rs : lists)
    for (const auto& [b, e] : rs) {
      if (b < 0 || e > total || b >= e) {
        why = QString("bad range [%1, %2)").arg(b).arg(e);
        return false;
      }
      for (int64_t i = b; i < e; ++i) ++count[static_cast<size_t>(i)];
    }
  for (int64_t i = 0; i < total; ++i)
    if (count[static_cast<size_t>(i)] != 1) {
      why = QString("element %1 held %2 times").arg(i).arg(count[static_cast<size_t>(i)]);
      return false;
    }
  return true;
}

QImage grabOf(HoldingsView& view) {
  view.resize(kWidth, view.minimumSizeHint().height());
  return view.grab().toImage().convertToFormat(QImage::Format_RGB32);
}

void save(const QImage& image, const QString& name) {
  const QString dir = QStringLiteral(SHARDLAB_BINARY_DIR "/screenshots");
  QVERIFY(QDir().mkpath(dir));
  QVERIFY(image.save(dir + QStringLiteral("/app-holdings-%1.png").arg(name)));
}

}  // namespace

class TestHoldingsView : public QObject {
  Q_OBJECT

  // A real threads run of toy.json under `strategy` (the app's RunController, to the end).
  bool runToy(const QString& strategy, net::RunModel& out, int pp = 1) {
    JobSpec job = load_job(SHARDLAB_SOURCE_DIR "/resources/jobs/toy.json");
    job.parallel.strategy = strategy.toStdString();
    if (pp > 1) {  // pp x dp on the same 4 ranks
      job.parallel.pp = pp;
      job.parallel.dp = 4 / pp;
      job.parallel.micro_batches = 2;
    }
    RunController run;
    QSignalSpy finished(&run, &RunController::finished);
    LaunchOptions options;
    options.record_path = "-";
    if (!run.start(job, options)) {
      qWarning() << run.lastError();
      return false;
    }
    if (!finished.wait(120000) || !finished.front().at(0).toBool()) return false;
    out = run.model();
    return true;
  }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    qputenv("SHARDLAB_RUNS_DIR", tmp_.filePath("runs").toLocal8Bit());
  }

  void drawsWhatEveryRankHolds_data() {
    QTest::addColumn<QString>("strategy");
    QTest::newRow("zero2") << QString("zero2");
    QTest::newRow("fsdp") << QString("fsdp");
  }

  void drawsWhatEveryRankHolds() {
    QFETCH(QString, strategy);
    net::RunModel model;
    QVERIFY(runToy(strategy, model));
    QCOMPARE(model.layouts(), uint64_t{4});
    QCOMPARE(model.ranks().size(), size_t{4});

    HoldingsView view;
    view.update(model);
    const QImage image = grabOf(view);
    save(image, strategy);

    // The layout as the ranks sent it (not through the view).
    const telemetry::LayoutEvent& first = *model.ranks().at(0).layout;
    int64_t total = 0;
    for (const auto& t : first.tensors) total = std::max(total, t.offset + t.size);
    QCOMPARE(total, int64_t{1124});
    QCOMPARE(view.total(), total);
    QVERIFY2(view.statusText().startsWith(strategy + " on 4 ranks"), qPrintable(view.statusText()));

    const QRectF axis = view.axisRect();
    QVERIFY(axis.width() > 500);
    const auto xOf = [&](int64_t i) {
      return axis.left() + static_cast<double>(i) / static_cast<double>(total) * axis.width();
    };
    std::vector<double> boundaries;
    for (const auto& t : first.tensors) boundaries.push_back(xOf(t.offset));

    const std::vector<HoldingsView::DrawnLane> lanes = view.drawnLanes();
    QCOMPARE(int(lanes.size()), 4 * 4);  // params, grads, exp_avg, exp_avg_sq on each rank
    std::map<QString, std::vector<Ranges>> by_lane;  // lane -> per rank
    int colour_checks = 0, gap_checks = 0, edge_checks = 0;
    for (const HoldingsView::DrawnLane& d : lanes) {
      const telemetry::LayoutEvent& e = *model.ranks().at(d.rank).layout;
      QCOMPARE(e.state_arrays, (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
      const QString where = QString("rank %1 %2").arg(d.rank).arg(d.lane);
      Ranges want;
      MemCategory cat = MemCategory::optimizer_state;
      if (d.lane == "params") {
        want = toPairs(e.params);
        cat = MemCategory::params;
      } else if (d.lane == "grads") {
        want = toPairs(e.grads);
        cat = MemCategory::grads;
      } else {
        QVERIFY2(d.lane == "exp_avg" || d.lane == "exp_avg_sq", qPrintable(where));
        want = toPairs(e.optimizer_state);
      }
      by_lane[d.lane].push_back(want);
      // (a) the ranges and where they are drawn.
      QCOMPARE(d.index_ranges, want);
      QCOMPARE(d.x_ranges.size(), want.size());
      QVERIFY(std::abs(d.rect.left() - axis.left()) < 1 &&
              std::abs(d.rect.width() - axis.width()) < 1);
      for (size_t i = 0; i < want.size(); ++i) {
        QVERIFY2(std::abs(d.x_ranges[i].first - xOf(want[i].first)) <= 1, qPrintable(where));
        QVERIFY2(std::abs(d.x_ranges[i].second - xOf(want[i].second)) <= 1, qPrintable(where));
      }
      // (b) the pixels: the colour in the middle of each held range and 2 px inside both its
      // ends (away from the tensor boundaries drawn across it), not 2 px outside its ends when
      // that is a gap, nor in the middle of a gap of at least 4 px.
      const QColor colour = paletteOf(cat);
      const int y = static_cast<int>(d.rect.center().y());
      const auto nearBoundary = [&](int x) {
        return std::any_of(boundaries.begin(), boundaries.end(),
                           [&](double bx) { return std::abs(bx - (x + 0.5)) < 2; });
      };
      const auto inGap = [&](int x) {  // no held range within 2 px, and on the axis
        if (x < axis.left() + 2 || x > axis.right() - 2) return false;
        return std::none_of(want.begin(), want.end(), [&](const auto& r) {
          return x + 0.5 > xOf(r.first) - 2 && x + 0.5 < xOf(r.second) + 2;
        });
      };
      const auto pixelIs = [&](int x, bool held) {
        const QColor c(image.pixel(x, y));
        if ((c == colour) == held) return true;
        qWarning().noquote() << QString("%1: pixel (%2, %3) is %4, %5 %6")
                                    .arg(where)
                                    .arg(x)
                                    .arg(y)
                                    .arg(c.name(), held ? "want" : "must not be", colour.name());
        return false;
      };
      for (const auto& [b, e2] : want) {
        const double x0 = xOf(b), x1 = xOf(e2);
        if (x1 - x0 < 6) continue;
        // The middle, or the nearest column of the range at least 2 px from every boundary.
        const int mid = static_cast<int>(std::floor((x0 + x1) / 2));
        for (int off = 0; off <= (x1 - x0) / 2; ++off) {
          const int x = off % 2 == 0 ? mid + off / 2 : mid - (off + 1) / 2;
          if (x < x0 + 1 || x > x1 - 2 || nearBoundary(x)) continue;
          QVERIFY(pixelIs(x, true));
          ++colour_checks;
          break;
        }
        for (int x : {static_cast<int>(std::floor(x0)) + 2, static_cast<int>(std::ceil(x1)) - 3})
          if (!nearBoundary(x)) {
            QVERIFY(pixelIs(x, true));
            ++edge_checks;
          }
        for (int x : {static_cast<int>(std::floor(x0)) - 3, static_cast<int>(std::ceil(x1)) + 2})
          if (inGap(x)) {
            QVERIFY(pixelIs(x, false));
            ++edge_checks;
          }
      }
      // Gaps: the stretches of [0, total) outside the held ranges.
      int64_t at = 0;
      Ranges gaps;
      for (const auto& [b, e2] : want) {
        if (b > at) gaps.emplace_back(at, b);
        at = std::max(at, e2);
      }
      if (at < total) gaps.emplace_back(at, total);
      for (const auto& [b, e2] : gaps) {
        const double x0 = xOf(b), x1 = xOf(e2);
        if (x1 - x0 < 4) continue;
        const int x = static_cast<int>(std::floor((x0 + x1) / 2));
        QVERIFY(pixelIs(x, false));
        ++gap_checks;
      }
    }
    QVERIFY(colour_checks >= 16);  // at least one per lane
    QVERIFY(gap_checks >= 12);     // every sharded lane of every rank has a gap
    QVERIFY(edge_checks >= 16 * 2 + 12);

    // (c) the strategies' definitions.
    QString why;
    const auto whole = [&](const Ranges& r) { return r == Ranges{{0, total}}; };
    for (const QString& lane :
         {QString("params"), QString("grads"), QString("exp_avg"), QString("exp_avg_sq")}) {
      const std::vector<Ranges>& per_rank = by_lane[lane];
      QCOMPARE(int(per_rank.size()), 4);
      const bool sharded = lane != "params" || strategy == "fsdp";
      if (sharded) {
        QVERIFY2(partition(per_rank, total, why), qPrintable(lane + ": " + why));
      } else {
        for (const Ranges& r : per_rank) QVERIFY2(whole(r), qPrintable(lane));
      }
    }

    // Tooltips: the tensor under the cursor and its range, the rank and the lane; the padding.
    const HoldingsView::DrawnLane& grads1 = *std::find_if(
        lanes.begin(), lanes.end(), [](const auto& d) { return d.rank == 1 && d.lane == "grads"; });
    const auto& t = first.tensors.front();
    const QPoint in_first(static_cast<int>((xOf(t.offset) + xOf(t.offset + t.size)) / 2),
                          static_cast<int>(grads1.rect.center().y()));
    const QString tip = view.toolTipAt(in_first);
    QVERIFY2(tip.contains(QString("%1 [%2, %3)")
                              .arg(QString::fromStdString(t.name))
                              .arg(t.offset)
                              .arg(t.offset + t.size)),
             qPrintable(tip));
    QVERIFY2(tip.contains("rank 1") && tip.contains("grads"), qPrintable(tip));
    for (const HoldingsView::DrawnLane& d : lanes) {
      if (d.padding <= 0) continue;
      const QString pad = view.toolTipAt(
          QPoint(static_cast<int>(axis.right()) + 9, static_cast<int>(d.rect.center().y())));
      QVERIFY2(pad.contains(QString("+%1 padding elements").arg(d.padding)), qPrintable(pad));
    }
  }

  // One step, phase by phase, on the same real runs: ▶ moves exactly one frame; at the first
  // reduce-scatter of gradients every rank's receive bar on its grads lane covers its own chunk
  // of the unit (the unit padded to a multiple of 4 and cut in 4 equal chunks, chunk r for rank
  // r: ZeRO paper section 5, written here) at its offset within 1.5 px, its pixels are the
  // receive colour and the middle of every other rank's chunk is not; the send bar covers the
  // whole unit; at the update every rank's write bar on exp_avg covers its optimizer state.
  void scrubberLightsUpWhatAStepMoves_data() {
    QTest::addColumn<QString>("strategy");
    QTest::newRow("zero2") << QString("zero2");
    QTest::newRow("fsdp") << QString("fsdp");
  }

  void scrubberLightsUpWhatAStepMoves() {
    QFETCH(QString, strategy);
    net::RunModel model;
    QVERIFY(runToy(strategy, model));
    QWidget page;
    auto* column = new QVBoxLayout(&page);
    auto* scrubber = new StepScrubber;
    auto* view = new HoldingsView;
    column->addWidget(scrubber);
    column->addWidget(view, 1);
    QObject::connect(scrubber, &StepScrubber::frameChanged, view, &HoldingsView::setFrame);
    view->update(model);
    scrubber->update(model);
    QVERIFY(scrubber->live());
    QCOMPARE(scrubber->replay().step, int64_t{40});  // the toy's last step
    QCOMPARE(scrubber->frameIndex(), 0);
    page.resize(kWidth, scrubber->sizeHint().height() + view->minimumSizeHint().height() + 30);
    auto* next = scrubber->findChild<QPushButton*>("replayNext");
    QVERIFY(next);
    const auto is = [&](const char* op, telemetry::CollectiveArray array) {
      const net::ReplayFrame* f = scrubber->currentFrame();
      return f && f->op == op && f->array == array;
    };
    while (!is("reduce_scatter", telemetry::CollectiveArray::grads)) {
      const int before = scrubber->frameIndex();
      QTest::mouseClick(next, Qt::LeftButton);
      QCOMPARE(scrubber->frameIndex(), before + 1);
      QVERIFY(!scrubber->live());
    }
    QVERIFY2(scrubber->titleText().startsWith("reduce_scatter of grads"),
             qPrintable(scrubber->titleText()));
    const int unit = scrubber->currentFrame()->unit;
    const telemetry::LayoutEvent& l0 = *model.ranks().at(0).layout;
    QVERIFY(unit >= 0 && unit < static_cast<int>(l0.units.size()));
    QCOMPARE(l0.units[static_cast<size_t>(unit)].size(), size_t{1});
    const int64_t ub = l0.units[static_cast<size_t>(unit)][0].begin;
    const int64_t ue = l0.units[static_cast<size_t>(unit)][0].end;
    const int64_t chunk = (ue - ub + 3) / 4;
    const auto chunkOf = [&](int r) {
      return std::pair<int64_t, int64_t>(std::min(ue, ub + r * chunk),
                                         std::min(ue, ub + (r + 1) * chunk));
    };
    const QImage image = page.grab().toImage().convertToFormat(QImage::Format_RGB32);
    const QString dir = QStringLiteral(SHARDLAB_BINARY_DIR "/screenshots");
    QVERIFY(QDir().mkpath(dir));
    QVERIFY(image.save(dir + QStringLiteral("/app-step-%1.png").arg(strategy)));

    const QRectF axis = view->axisRect();
    const int64_t total = view->total();
    const auto xOf = [&](int64_t i) {
      return axis.left() + static_cast<double>(i) / static_cast<double>(total) * axis.width();
    };
    const QPoint offset = view->mapTo(&page, QPoint(0, 0));
    const QColor receive = HoldingsView::roleColor("receive");
    int receives = 0, sends = 0;
    for (const HoldingsView::DrawnHighlight& h : view->drawnHighlights()) {
      QCOMPARE(h.lane, QString("grads"));
      const QString where = QString("rank %1 %2").arg(h.rank).arg(h.role);
      if (h.role == "send") {
        ++sends;
        QCOMPARE(h.index_ranges, (Ranges{{ub, ue}}));
        continue;
      }
      QCOMPARE(h.role, QString("receive"));
      ++receives;
      const auto [b, e] = chunkOf(h.rank);
      QCOMPARE(h.index_ranges, (Ranges{{b, e}}));
      QVERIFY2(std::abs(h.x_ranges[0].first - xOf(b)) <= 1.5, qPrintable(where));
      QVERIFY2(std::abs(h.x_ranges[0].second - xOf(e)) <= 1.5, qPrintable(where));
      const int y = offset.y() + static_cast<int>(h.bar.center().y());
      const int mid = offset.x() + static_cast<int>((xOf(b) + xOf(e)) / 2);
      QVERIFY2(image.pixelColor(mid, y) == receive, qPrintable(where));
      for (int other = 0; other < 4; ++other) {
        if (other == h.rank) continue;
        const auto [ob, oe] = chunkOf(other);
        const int ox = offset.x() + static_cast<int>((xOf(ob) + xOf(oe)) / 2);
        QVERIFY2(image.pixelColor(ox, y) != receive, qPrintable(where));
      }
    }
    QCOMPARE(receives, 4);
    QCOMPARE(sends, 4);

    while (scrubber->currentFrame()->kind != net::ReplayKind::update) {
      const int before = scrubber->frameIndex();
      QTest::mouseClick(next, Qt::LeftButton);
      QCOMPARE(scrubber->frameIndex(), before + 1);
    }
    int writes = 0;
    for (const HoldingsView::DrawnHighlight& h : view->drawnHighlights()) {
      if (h.lane != "exp_avg" || h.role != "write") continue;
      ++writes;
      QCOMPARE(h.index_ranges, toPairs(model.ranks().at(h.rank).layout->optimizer_state));
    }
    QCOMPARE(writes, 4);
    // Live again: the newest step, and the frames stay.
    scrubber->findChild<QCheckBox*>("replayLive")->setChecked(true);
    QVERIFY(scrubber->live());
    QCOMPARE(scrubber->replay().step, int64_t{40});
  }

  // pp 2 x dp 2: a stage's forward is a frame of that stage's 2 ranks; the other stage's strips
  // are dimmed (veiled: their held parameters no longer in the lane's colour), its own are not.
  void scrubberDimsRanksNotInTheFrame() {
    net::RunModel model;
    QVERIFY(runToy("zero1", model, 2));
    HoldingsView view;
    StepScrubber scrubber;
    QObject::connect(&scrubber, &StepScrubber::frameChanged, &view, &HoldingsView::setFrame);
    view.update(model);
    scrubber.update(model);
    const net::ReplayFrame* f = scrubber.currentFrame();
    QVERIFY(f);
    QCOMPARE(f->kind, net::ReplayKind::forward);
    QCOMPARE(int(f->ranks.size()), 2);
    std::vector<bool> in(4, false);
    for (const net::ReplayRank& r : f->ranks) in[static_cast<size_t>(r.rank)] = true;
    const QImage image = grabOf(view);
    const QColor params = HoldingsView::laneColor(MemCategory::params);
    int checked = 0;
    for (const HoldingsView::DrawnLane& d : view.drawnLanes()) {
      if (d.lane != "params" || d.x_ranges.empty()) continue;
      QCOMPARE(view.dimmed(d.rank), !in[static_cast<size_t>(d.rank)]);
      // Across its held ranges, in the lane's lower quarter (clear of the bars over its upper
      // half): pixels of the lane's colour where not dimmed, none where dimmed.
      const int y = static_cast<int>(d.rect.bottom() - d.rect.height() / 4);
      int coloured = 0;
      for (const auto& [x0, x1] : d.x_ranges)
        for (int x = static_cast<int>(x0) + 1; x < static_cast<int>(x1) - 1; ++x)
          coloured += image.pixelColor(x, y) == params;
      QVERIFY2(view.dimmed(d.rank) ? coloured == 0 : coloured > 10,
               qPrintable(QString("rank %1: %2 pixels").arg(d.rank).arg(coloured)));
      ++checked;
    }
    QCOMPARE(checked, 4);
  }

  // A recording made before protocol version 4: HELLO, STEP and MEMORY, no LAYOUT.
  void oldRecordingSaysLayoutUnknown() {
    net::RunModel model;
    test::EventFeeder feed(model);
    for (int r = 0; r < 4; ++r) {
      model.add(net::Message{test::grid_hello("old", r, 4, 1, 1, 4)});
      feed.add(r, 1000.0, test::make_step(1, 2.5, 0.1));
      telemetry::MemoryEvent mem;
      mem.current[static_cast<size_t>(MemCategory::params)] = 4496;
      mem.peak = mem.current;
      feed.add(r, 1000.1, mem);
    }
    QCOMPARE(model.layouts(), uint64_t{0});
    HoldingsView view;
    view.update(model);
    QVERIFY(view.drawnLanes().empty());
    QVERIFY(view.axisRect().isNull());
    QVERIFY2(view.statusText().startsWith("Layout unknown"), qPrintable(view.statusText()));
    QVERIFY(view.toolTipAt(QPoint(200, 100)).isEmpty());
    const QImage image = grabOf(view);
    QVERIFY(!image.isNull());
    // Nothing to replay: the scrubber says why and its controls are off; nothing is lit.
    StepScrubber scrubber;
    scrubber.update(model);
    QCOMPARE(scrubber.replay().step, int64_t{0});
    QVERIFY(scrubber.currentFrame() == nullptr);
    QVERIFY(!scrubber.findChild<QPushButton*>("replayNext")->isEnabled());
    QVERIFY2(scrubber.titleText() == QString::fromStdString(scrubber.replay().note) &&
                 !scrubber.titleText().isEmpty(),
             qPrintable(scrubber.titleText()));
    view.setFrame(nullptr);
    QVERIFY(view.drawnHighlights().empty());
  }

  // 64 ranks (a hand-made fsdp-like layout; rank 5 sent none): strips stacked without overlap, the
  // lane labels, the axis and the bytes side by side, the unknown rank says so.
  void sixtyFourRanksStackWithoutOverlap() {
    net::RunModel model;
    test::EventFeeder feed(model);
    const int world = 64;
    const int64_t total = 64 * 1000 + 17;
    for (int r = 0; r < world; ++r) {
      model.add(net::Message{test::grid_hello("big", r, world, 1, 1, world)});
      if (r == 5) continue;
      telemetry::LayoutEvent e;
      e.strategy = "fsdp";
      e.tensors = {{"wte", 0, 40000}, {"h.0.attn.weight", 40000, 24017}};
      const int64_t b = r * 1000, end = r == world - 1 ? total : b + 1000;
      e.params = e.grads = e.optimizer_state = {{b, end}};
      e.state_arrays = {"exp_avg", "exp_avg_sq"};
      e.params_padding = e.grads_padding = e.state_padding = r == world - 1 ? 0 : 1;
      e.planned = {4004, 4004, 8008};
      e.formula = "fsdp: 4*Psi''/N + 4*Psi''/N + 8*Psi''/N";
      feed.add(r, 1000.0, e);
    }
    HoldingsView view;
    view.update(model);
    QCOMPARE(view.ranks(), world);
    QVERIFY(!view.hasLayout(5) && view.hasLayout(6));
    const QSize min = view.minimumSizeHint();
    QVERIFY(min.height() > world * 3 * 14);  // every strip at full pitch: it scrolls
    const QImage image = grabOf(view);
    save(image, "64-ranks");
    const std::vector<HoldingsView::DrawnLane> lanes = view.drawnLanes();
    QCOMPARE(int(lanes.size()), (world - 1) * 4);
    for (size_t i = 1; i < lanes.size(); ++i)
      QVERIFY2(lanes[i].rect.top() > lanes[i - 1].rect.bottom(), qPrintable(QString::number(i)));
    QVERIFY(lanes.back().rect.bottom() < min.height());
    QVERIFY(view.toolTipAt(QPoint(static_cast<int>(view.axisRect().center().x()),
                                  static_cast<int>(lanes[5 * 4].rect.center().y())))
                .contains("rank 6"));
  }

 private:
  QTemporaryDir tmp_;
};

QTEST_MAIN(TestHoldingsView)
#include "tst_holdings_view.moc"
