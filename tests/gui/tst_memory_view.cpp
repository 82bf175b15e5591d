// The per-rank memory view, offscreen: its predictions are the planner's own figures (computed
// here by independent planner calls), ZeRO-2 and tp=4 show their savings, an invalid job shows the
// engine's message and no prediction, measured figures come from a RunModel, and the chart holds
// two stacked bars per rank. Its labels at 8 and 64 ranks (fed from hand-made HELLO, MEMORY and
// STEP events) never overlap nor elide, the legend names every category in full, and "Model
// states only" scales the bars to the model states alone (on by itself when activations dwarf
// them, then as the user chooses). The views at 8 and 64 ranks are saved to
// <build>/screenshots/memory-view-{8,64}.png.
#include <QtTest>

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QDir>
#include <QStackedBarSeries>
#include <QTextDocument>
#include <QValueAxis>

#include "engine/job/job_spec.h"
#include "engine/plan/memory/planner.h"
#include "engine/topology/topology.h"
#include "gui/memory_view.h"
#include "net/run_model.h"
#include "tests/common/telemetry_events.h"

using namespace shardlab;
using namespace shardlab::gui;
using C = MemCategory;

namespace {

JobSpec mlp_job(const std::string& strategy, int world) {
  JobSpec job =
      load_job(QString(SHARDLAB_SOURCE_DIR "/resources/jobs/fashion_mlp.json").toStdString());
  // Psi = 234,612, a multiple of 4, so ZeRO's flat-buffer padding adds nothing to params.
  job.model.mlp.hidden = {256, 126};
  job.parallel.strategy = strategy;
  job.parallel.world_size = world;
  return job;
}

// A small GPT job (chars corpus, vocab 96, context 16, width 32, 2 layers, 4 heads).
JobSpec gpt_job(const std::string& strategy, int world, int pp, int tp, int dp) {
  JobSpec job = load_job(QString(SHARDLAB_SOURCE_DIR "/resources/jobs/gpt-3d.json").toStdString());
  job.model.gpt.vocab_size = 96;
  job.model.gpt.context = 16;
  job.model.gpt.width = 32;
  job.model.gpt.layers = 2;
  job.model.gpt.heads = 4;
  job.parallel.strategy = strategy;
  job.parallel.world_size = world;
  job.parallel.pp = pp;
  job.parallel.tp = tp;
  job.parallel.dp = dp;
  if (pp == 1) {  // the pipeline-only fields must keep their defaults
    job.parallel.schedule = ParallelConfig{}.schedule;
    job.parallel.pp_partition = ParallelConfig{}.pp_partition;
  }
  if (pp == 1 && tp == 1) job.parallel.micro_batches = 1;
  return job;
}

constexpr int64_t kKiB = 1024, kMiB = 1024 * 1024;

// A run of world = pp * tp * dp ranks as the collector would hold it after each rank's HELLO, one
// MEMORY event (its current bytes: `params`, `grads`, `optimizer_state` and `activations`, rank r's
// params r KiB more than rank 0's) and two STEP events.
net::RunModel run_of(int pp, int tp, int dp, int64_t params, int64_t grads, int64_t optimizer_state,
                     int64_t activations) {
  net::RunModel run;
  const int world = pp * tp * dp;
  for (int r = 0; r < world; ++r)
    run.add(net::Message{test::grid_hello("job", r, world, pp, tp, dp)});
  test::EventFeeder feed(run);
  for (int r = 0; r < world; ++r) {
    telemetry::MemoryEvent mem;
    mem.current[static_cast<size_t>(C::params)] = params + r * kKiB;
    mem.current[static_cast<size_t>(C::grads)] = grads;
    mem.current[static_cast<size_t>(C::optimizer_state)] = optimizer_state;
    mem.current[static_cast<size_t>(C::activations)] = activations;
    mem.peak = mem.current;
    feed.add(r, 100.0, mem);
    feed.add(r, 101.0, test::make_step(1, 3.0, 0.5));
    feed.add(r, 102.0, test::make_step(2, 2.9, 0.5));
  }
  return run;
}

// The rich-text legend as a reader sees it.
QString plain(const QLabel* label) {
  QTextDocument doc;
  doc.setHtml(label->text());
  return doc.toPlainText().replace(QChar(0xa0), QLatin1Char(' '));
}

// Laid out and painted as in the window; saved to <build>/screenshots/NAME.png.
void show_and_save(MemoryView& view, const QString& name) {
  view.show();
  QVERIFY(QTest::qWaitForWindowExposed(&view));
  QCoreApplication::processEvents();
  QDir().mkpath(QStringLiteral(SHARDLAB_BINARY_DIR "/screenshots"));
  const QString path = QStringLiteral(SHARDLAB_BINARY_DIR "/screenshots/%1.png").arg(name);
  QVERIFY2(view.grab().save(path), qPrintable(path));
}

// The bar set of `name` ("params", ...), or null.
QBarSet* set_named(const MemoryView& view, const QString& name) {
  for (QBarSet* set : view.series()->barSets())
    if (set->label() == name) return set;
  return nullptr;
}

// The tallest stack of the series (in axis units).
double tallest_stack(const MemoryView& view) {
  double most = 0;
  const QList<QBarSet*> sets = view.series()->barSets();
  for (qsizetype i = 0; !sets.isEmpty() && i < sets.front()->count(); ++i) {
    double stack = 0;
    for (QBarSet* set : sets) stack += set->at(i);
    most = std::max(most, stack);
  }
  return most;
}

}  // namespace

class TestMemoryView : public QObject {
  Q_OBJECT
 private slots:
  void zero2SavesGradsAndStateOverDdp() {
    const JobSpec ddp = mlp_job("ddp", 4), zero2 = mlp_job("zero2", 4);
    MemoryViewModel a, b;
    a.setJob(ddp);
    b.setJob(zero2);
    QVERIFY2(a.error().isEmpty(), qPrintable(a.error()));
    QVERIFY2(b.error().isEmpty(), qPrintable(b.error()));
    QCOMPARE(a.ranks(), 4);
    QCOMPARE(b.ranks(), 4);
    const ParamLayout layout = model_layout(ddp.model);
    const MemoryPlan pa = plan_memory(layout, ddp.optimizer, ddp.parallel, 4);
    const MemoryPlan pb = plan_memory(layout, zero2.optimizer, zero2.parallel, 4);
    QCOMPARE(layout.size() % 4, int64_t{0});
    for (int r = 0; r < 4; ++r) {
      for (C c : {C::params, C::grads, C::optimizer_state}) {
        QCOMPARE(a.predicted(r, c), pa.steady[c]);
        QCOMPARE(b.predicted(r, c), pb.steady[c]);
      }
      QVERIFY(b.predicted(r, C::optimizer_state) < a.predicted(r, C::optimizer_state));
      QVERIFY(b.predicted(r, C::grads) < a.predicted(r, C::grads));
      // The flat buffer pads Psi to a multiple of N; with this model that is Psi itself.
      QCOMPARE(b.predicted(r, C::params), a.predicted(r, C::params));
      QCOMPARE(a.predicted(r, C::activations), int64_t{0});
    }
    QCOMPARE(a.predicted(4, C::params), int64_t{0});  // out of range
  }

  void hybridRanksAreThePlannersPerRank() {
    const JobSpec job = gpt_job("zero1", 8, 2, 2, 2);
    MemoryViewModel m;
    m.setJob(job);
    QVERIFY2(m.error().isEmpty(), qPrintable(m.error()));
    QVERIFY(m.note().isEmpty());
    QCOMPARE(m.ranks(), 8);
    for (int r = 0; r < 8; ++r) {
      const MemoryPlan plan = plan_memory_hybrid(job.model, job.optimizer, job.parallel, 8, r);
      for (C c : {C::params, C::grads, C::optimizer_state})
        QCOMPARE(m.predicted(r, c), plan.steady[c]);
    }
    const Topology topo = Topology::make({2, 2, 2}, 8);
    const int stage0 = topo.rank({.pp = 0, .tp = 0, .dp = 0});
    const int stage1 = topo.rank({.pp = 1, .tp = 0, .dp = 0});
    QVERIFY(m.predicted(stage0, C::params) != m.predicted(stage1, C::params));
  }

  void tp4HoldsFewerParamsThanTp1() {
    MemoryViewModel tp1, tp4;
    tp1.setJob(gpt_job("ddp", 4, 1, 1, 4));
    tp4.setJob(gpt_job("ddp", 4, 1, 4, 1));
    QVERIFY2(tp1.error().isEmpty(), qPrintable(tp1.error()));
    QVERIFY2(tp4.error().isEmpty(), qPrintable(tp4.error()));
    for (int r = 0; r < 4; ++r) QVERIFY(tp4.predicted(r, C::params) < tp1.predicted(r, C::params));
  }

  void unknownVocabularyUsesAPlaceholder() {
    JobSpec job = gpt_job("zero1", 8, 2, 2, 2);
    job.model.gpt.vocab_size = 0;
    MemoryViewModel m;
    m.setJob(job);
    QVERIFY2(m.error().isEmpty(), qPrintable(m.error()));
    QVERIFY(m.note().contains("96"));
    job.model.gpt.vocab_size = MemoryViewModel::kPlaceholderVocab;
    const MemoryPlan plan = plan_memory_hybrid(job.model, job.optimizer, job.parallel, 8, 3);
    QCOMPARE(m.predicted(3, C::params), plan.steady[C::params]);
  }

  void invalidJobShowsTheProblemAndNoPrediction() {
    MemoryViewModel m;
    m.setJob(gpt_job("zero1", 8, 2, 2, 2));
    QVERIFY(m.hasPrediction());
    m.setJob(gpt_job("ddp", 3, 1, 3, 1));  // 3 does not divide 4 heads
    QVERIFY(!m.hasPrediction());
    QVERIFY2(m.error().contains("parallel.tp"), qPrintable(m.error()));
    QCOMPARE(m.ranks(), 0);
    QCOMPARE(m.predicted(0, C::params), int64_t{0});

    MemoryView view;
    view.setJob(gpt_job("ddp", 3, 1, 3, 1));
    QVERIFY(view.statusText().contains("parallel.tp"));
  }

  void measuredComesFromTheRunModel() {
    telemetry::MemoryEvent mem;
    mem.current[static_cast<size_t>(C::params)] = 4000;
    mem.current[static_cast<size_t>(C::grads)] = 1000;
    mem.peak = mem.current;
    net::RunModel run;
    run.add(net::Message{telemetry::Event{.rank = 1, .seq = 0, .time = 1.0, .payload = mem}});
    MemoryViewModel m;
    m.setJob(mlp_job("zero2", 4));
    m.setMeasured(run);
    QCOMPARE(m.measured(1, C::grads), std::optional<int64_t>(1000));
    QCOMPARE(m.measured(1, C::params), std::optional<int64_t>(4000));
    QVERIFY(!m.measured(0, C::grads).has_value());
    QCOMPARE(m.ranks(), 4);

    MemoryView view;
    view.setJob(mlp_job("zero2", 4));
    view.setMeasured(run);
    const QList<QBarSet*> sets = view.series()->barSets();
    QCOMPARE(sets.size(), 4);
    QCOMPARE(sets[1]->count(), 8);
    QVERIFY(sets[1]->at(3) > 0);    // rank 1 measured grads
    QCOMPARE(sets[1]->at(1), 0.0);  // rank 0 measured: nothing reported
  }

  void twoStackedBarsPerRank() {
    MemoryView view;
    view.setJob(gpt_job("zero1", 8, 2, 2, 2));
    QCOMPARE(view.series()->barSets().size(), 4);
    for (QBarSet* set : view.series()->barSets()) QCOMPARE(set->count(), 16);
    QVERIFY(!view.statusText().contains("first"));
    // Rank 0's planned params bar is the planner's figure in the axis unit (non-zero).
    QVERIFY(view.series()->barSets()[0]->at(0) > 0);

    JobSpec big = mlp_job("ddp", 100);
    big.train.batch_size = 200;  // divisible by the world size
    view.setJob(big);
    QVERIFY2(view.model().error().isEmpty(), qPrintable(view.model().error()));
    QCOMPARE(view.model().ranks(), 100);
    QCOMPARE(view.series()->barSets().size(), 4);
    for (QBarSet* set : view.series()->barSets())
      QCOMPARE(set->count(), 2 * MemoryView::kMaxDrawnRanks);
    QVERIFY2(view.statusText().contains("first 64 of 100 ranks"), qPrintable(view.statusText()));
  }

  // The rank labels under the bars at 8 and 64 ranks, in the app's memory pane size (about
  // 440 x 470 at the default 1600 x 1000 window): every label apart from every other, none
  // elided, every rank labelled at 8, every 8th at 64; the legend names every category in full.
  void labelsAreReadableAt8And64Ranks_data() {
    QTest::addColumn<int>("pp");
    QTest::addColumn<int>("tp");
    QTest::addColumn<int>("dp");
    QTest::addColumn<QStringList>("ranks");  // the rank labels drawn, in order
    QTest::addColumn<bool>("letters");       // P and M under each bar
    QTest::newRow("8") << 2 << 2 << 2 << QStringList{"0", "1", "2", "3", "4", "5", "6", "7"}
                       << true;
    QTest::newRow("64") << 4 << 4 << 4 << QStringList{"0", "8", "16", "24", "32", "40", "48", "56"}
                        << false;
  }

  void labelsAreReadableAt8And64Ranks() {
    QFETCH(int, pp);
    QFETCH(int, tp);
    QFETCH(int, dp);
    QFETCH(QStringList, ranks);
    QFETCH(bool, letters);
    MemoryView view;
    view.resize(440, 470);
    if (pp * tp * dp == 8) view.setJob(gpt_job("zero1", 8, 2, 2, 2));
    view.setMeasured(run_of(pp, tp, dp, 100 * kKiB, 100 * kKiB, 200 * kKiB, 9 * kMiB));
    show_and_save(view, QStringLiteral("memory-view-%1").arg(pp * tp * dp));

    // QtCharts' own category labels (which elide) are not drawn.
    const auto axes = view.chartView()->chart()->axes(Qt::Horizontal);
    QCOMPARE(axes.size(), 1);
    QVERIFY(!axes.front()->labelsVisible());

    const QList<MemoryView::Label> labels = view.labels();
    QStringList numbers;
    int p = 0, m = 0;
    const QRectF scene = view.chartView()->scene()->sceneRect();
    for (qsizetype i = 0; i < labels.size(); ++i) {
      const MemoryView::Label& a = labels[i];
      QVERIFY2(!a.text.contains(QChar(0x2026)) && !a.text.contains(QLatin1String("...")),
               qPrintable(a.text));
      QVERIFY2(scene.contains(a.rect), qPrintable(a.text));
      for (qsizetype j = i + 1; j < labels.size(); ++j)
        QVERIFY2(!a.rect.intersects(labels[j].rect),
                 qPrintable(QString("\"%1\" overlaps \"%2\"").arg(a.text, labels[j].text)));
      bool number = false;
      a.text.toInt(&number);
      if (number) numbers << a.text;
      p += a.text == QLatin1String("P");
      m += a.text == QLatin1String("M");
    }
    QCOMPARE(numbers, ranks);
    QCOMPARE(p, letters ? 8 : 0);
    QCOMPARE(m, letters ? 8 : 0);
    QCOMPARE(labels.back().text, letters ? QString("rank (P: planned, M: measured)")
                                         : QString("rank (each pair: planned, measured)"));

    // The legend: whole names, wrapped between entries if need be, never cut.
    view.setModelStatesOnly(false);
    QCoreApplication::processEvents();
    QCOMPARE(view.legendEntries(),
             (QStringList{"params", "grads", "optimizer_state", "activations (not planned)"}));
    const QString legend = plain(view.legend());
    for (const char* name : {"params", "grads", "optimizer_state", "activations (not planned)"})
      QVERIFY2(legend.contains(QString::fromUtf8(name)), qPrintable(legend));
    QVERIFY(!legend.contains(QChar(0x2026)) && !legend.contains(QLatin1String("...")));
    QVERIFY(view.legend()->height() >= view.legend()->heightForWidth(view.legend()->width()));
  }

  // Activations of 9 MiB against 400 KiB of model states: "Model states only" comes on by itself,
  // drops the activations and scales the axis to the model states (the tallest reaches near the
  // top); unticked, the activations are back and the axis holds them; the user's choice stays
  // whatever the next figures say.
  void modelStatesOnlyHasItsOwnScale() {
    MemoryView view;
    view.setJob(gpt_job("zero1", 8, 2, 2, 2));
    QVERIFY(!view.modelStatesOnly());  // planned only: no activations yet
    QCOMPARE(view.series()->barSets().size(), 4);

    // Rank 7: params 107 KiB, grads 100 KiB, optimizer state 200 KiB: 407 KiB.
    view.setMeasured(run_of(2, 2, 2, 100 * kKiB, 100 * kKiB, 200 * kKiB, 9 * kMiB));
    QVERIFY(view.modelStatesOnly());
    QVERIFY(view.modelStatesBox()->isChecked());
    QVERIFY(!view.modelStatesChosen());
    QCOMPARE(view.series()->barSets().size(), 3);
    QVERIFY(set_named(view, "activations (not planned)") == nullptr);
    QCOMPARE(view.legendEntries(), (QStringList{"params", "grads", "optimizer_state"}));
    QCOMPARE(view.valueAxis()->titleText(), QString("model states (KiB)"));
    QCOMPARE(tallest_stack(view), 407.0);
    QVERIFY2(tallest_stack(view) / view.valueAxis()->max() > 0.9,
             qPrintable(QString::number(view.valueAxis()->max())));
    QVERIFY2(view.statusText().contains("activations (up to 9.0 MiB on a rank) are not drawn"),
             qPrintable(view.statusText()));
    // Planned bars sit on the same axis: rank 0's planned params in KiB.
    QCOMPARE(set_named(view, "params")->at(0),
             static_cast<double>(view.model().predicted(0, C::params)) / 1024.0);
    QCOMPARE(set_named(view, "params")->at(15), 107.0);  // rank 7 measured

    // The user unticks it: the activations come back and the axis holds the whole bars.
    view.modelStatesBox()->click();
    QVERIFY(!view.modelStatesOnly());
    QVERIFY(view.modelStatesChosen());
    QCOMPARE(view.series()->barSets().size(), 4);
    QCOMPARE(view.valueAxis()->titleText(), QString("steady memory (MiB)"));
    QVERIFY(view.valueAxis()->max() >= 9.0 + 407.0 / 1024);
    QVERIFY(tallest_stack(view) / view.valueAxis()->max() > 0.9);

    // The choice stays when the next figures would have turned it on again ...
    view.setMeasured(run_of(2, 2, 2, 100 * kKiB, 100 * kKiB, 200 * kKiB, 20 * kMiB));
    QVERIFY(!view.modelStatesOnly());
    // ... and once ticked by the user, stays on when activations are small.
    view.modelStatesBox()->click();
    QVERIFY(view.modelStatesOnly());
    view.setMeasured(run_of(2, 2, 2, 100 * kKiB, 100 * kKiB, 200 * kKiB, 10 * kKiB));
    QVERIFY(view.modelStatesOnly());
    QCOMPARE(view.series()->barSets().size(), 3);

    // Left to the rule, small activations keep it off.
    MemoryView fresh;
    fresh.setMeasured(run_of(2, 2, 2, 100 * kKiB, 100 * kKiB, 200 * kKiB, 1 * kMiB));
    QVERIFY(!fresh.modelStatesOnly());
    QCOMPARE(fresh.series()->barSets().size(), 4);
  }

  // The categories' colours are the palette both front ends read (engine/telemetry/palette.h), the
  // web page's too: written out here.
  void categoryColoursAreTheSharedPalettes() {
    QCOMPARE(MemoryView::categoryColor(C::params), QColor(0x00, 0x72, 0xb2));
    QCOMPARE(MemoryView::categoryColor(C::grads), QColor(0xe6, 0x9f, 0x00));
    QCOMPARE(MemoryView::categoryColor(C::optimizer_state), QColor(0x00, 0x9e, 0x73));
    QCOMPARE(MemoryView::categoryColor(C::activations), QColor(0xcc, 0x79, 0xa7));
    QCOMPARE(MemoryView::categoryColor(C::comm), QColor(0x56, 0xb4, 0xe9));
  }
};

QTEST_MAIN(TestMemoryView)
#include "tst_memory_view.moc"
