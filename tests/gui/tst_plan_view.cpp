// The app's Plan tab, offscreen: GPT-3 175B on 1,024 A100s planned from the form shows the same
// layouts as plan::search_plans called here on the same inputs (table figures as displayed, the
// chart's bars per stage, the usable and HBM lines, the time split), a fixed tp stays fixed, bad
// input shows the planner's message and an empty table, editing a preset's size makes the model
// custom, 64 stages get sparse stage labels, and the main window has the tab. Screenshots:
// <temp>/plan_view.png (GPT-3), plan_view_error.png (tp 3 of 1,024 GPUs), plan_view_pp64.png
// (1T parameters on 64 stages) and plan_view_window.png (the tab in the main window).
#include <QtTest>

#include <QBarSet>
#include <QCategoryAxis>
#include <QDialog>
#include <QDir>
#include <QHorizontalStackedBarSeries>
#include <QLineSeries>
#include <QPushButton>
#include <QStackedBarSeries>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableWidget>

#include <string>

#include "engine/job/job_spec.h"
#include "engine/plan/hardware.h"
#include "engine/plan/plan_inputs.h"
#include "engine/plan/search.h"
#include "gui/job_editor.h"
#include "gui/main_window.h"
#include "gui/plan_view.h"

using namespace shardlab;
using namespace shardlab::gui;

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

plan::GptShape preset(const std::string& name) {
  for (const plan::ModelPreset& p : plan::model_presets())
    if (p.name == name) return p.shape;
  qFatal("no preset %s", name.c_str());
}

// The planner called directly, as the form should call it.
plan::PlanResult expected(const std::string& model, int64_t gpus, int64_t batch,
                          plan::SearchOptions o) {
  plan::PlanJob job;
  job.model = preset(model);
  job.gpus = gpus;
  job.global_batch = batch;
  return plan::search_plans(job, plan::cluster_preset("a100-80gb"), o);
}

void fill(PlanView& v, const QString& model, int gpus, int batch) {
  QVERIFY(v.setField("model", model));
  QVERIFY(v.setField("gpu", "a100-80gb"));
  QVERIFY(v.setField("gpus", QString::number(gpus)));
  QVERIFY(v.setField("global-batch", QString::number(batch)));
}

QString text(const QTableWidget* t, int row, int col) {
  const QTableWidgetItem* item = t->item(row, col);
  return item ? item->text() : QString();
}

void press(PlanView& v) {
  QTest::mouseClick(v.planButton(), Qt::LeftButton);
  QApplication::processEvents();
}

bool any_dialog() {
  for (QWidget* w : QApplication::topLevelWidgets())
    if (qobject_cast<QDialog*>(w) && w->isVisible()) return true;
  return false;
}

void save(QWidget& w, const QString& name) {
  QApplication::processEvents();
  const QString path = QDir::temp().filePath(name);
  QVERIFY(w.grab().save(path));
  qInfo("screenshot: %s", qPrintable(path));
}

}  // namespace

class TestPlanView : public QObject {
  Q_OBJECT
 private slots:
  void gpt3On1024A100sIsTheSearchsAnswer() {
    PlanView v;
    v.resize(1160, 880);
    v.show();
    QVERIFY(QTest::qWaitForWindowExposed(&v));
    fill(v, "gpt3-175b", 1024, 1536);
    QCOMPARE(v.field("layers"), std::optional<std::string>("96"));  // the preset filled them
    QCOMPARE(v.field("tp"), std::nullopt);                          // "search"
    press(v);
    QVERIFY2(v.message().isEmpty(), qPrintable(v.message()));

    plan::SearchOptions o;
    o.top = 10;  // the form's "plans" field
    const plan::PlanResult want = expected("gpt3-175b", 1024, 1536, o);
    const QTableWidget* t = v.table();
    QCOMPARE(t->rowCount(), static_cast<int>(want.plans.size()));
    QVERIFY(t->rowCount() > 0);
    for (int r = 0; r < t->rowCount(); ++r) {
      const plan::Estimate& e = want.plans[static_cast<size_t>(r)];
      QCOMPARE(text(t, r, PlanView::kPp), QString::number(e.layout.pp));
      QCOMPARE(text(t, r, PlanView::kTp), QString::number(e.layout.tp));
      QCOMPARE(text(t, r, PlanView::kDp), QString::number(e.layout.dp));
      QCOMPARE(text(t, r, PlanView::kMicroBatch), QString::number(e.layout.micro_batch));
      QCOMPARE(text(t, r, PlanView::kInterleave), QString::number(e.layout.interleave));
      QCOMPARE(text(t, r, PlanView::kZero), QString::number(e.layout.zero));
      QCOMPARE(text(t, r, PlanView::kRecompute),
               QString::fromStdString(plan::recompute_name(e.layout.recompute)));
      QCOMPARE(text(t, r, PlanView::kTflops), QString::number(e.tflops_per_gpu, 'f', 1));
      QCOMPARE(text(t, r, PlanView::kStep), QString::number(e.step_seconds, 'f', 2));
      QCOMPARE(text(t, r, PlanView::kGib), QString::number(e.memory.total() / kGiB, 'f', 1));
      QCOMPARE(text(t, r, PlanView::kFits), e.fits ? QString("yes") : QString("no"));
    }

    // The best is drawn: one bar per stage, each category's values that plan's stages.
    const plan::Estimate& best = want.plans.front();
    QCOMPARE(v.shownPlan(), 0);
    QCOMPARE(t->currentRow(), 0);
    const QList<QBarSet*> sets = v.memorySeries()->barSets();
    QCOMPARE(sets.size(), 5);
    const double plan::MemoryBreakdown::*fields[] = {
        &plan::MemoryBreakdown::params, &plan::MemoryBreakdown::grads,
        &plan::MemoryBreakdown::optimizer_state, &plan::MemoryBreakdown::activations,
        &plan::MemoryBreakdown::comm};
    for (int c = 0; c < 5; ++c) {
      QCOMPARE(sets[c]->count(), static_cast<int>(best.stages.size()));
      for (int s = 0; s < sets[c]->count(); ++s)
        QCOMPARE(sets[c]->at(s), best.stages[static_cast<size_t>(s)].*fields[c] / kGiB);
    }
    QCOMPARE(sets[0]->label(), QString("params"));
    QCOMPARE(sets[0]->color(), MemoryView::categoryColor(MemCategory::params));
    QCOMPARE(sets[3]->color(), MemoryView::categoryColor(MemCategory::activations));
    QCOMPARE(v.stageAxis()->count(), static_cast<int>(best.stages.size()));  // 4: every stage
    QCOMPARE(v.usableLine()->at(0).y(), best.usable_bytes / kGiB);
    QCOMPARE(v.hbmLine()->at(0).y(), plan::gpu_preset("a100-80gb").hbm_bytes / kGiB);

    const QList<QBarSet*> time = v.timeSeries()->barSets();
    QCOMPARE(time.size(), 6);
    double sum = 0;
    for (const QBarSet* s : time) sum += s->at(0);
    QVERIFY(qAbs(sum - best.step_seconds) < 1e-9 * best.step_seconds);
    QVERIFY(time[0]->label().startsWith("compute"));
    QVERIFY(v.whyText().contains(QString::fromStdString(want.why.front())));
    QVERIFY(v.mfuText().contains(QString("MFU %1%").arg(best.mfu * 100, 0, 'f', 0)));
    QVERIFY(v.leftOutText().startsWith("left out"));

    save(v, "plan_view.png");

    // Another row selected: its stages drawn.
    v.table()->selectRow(2);
    QCOMPARE(v.shownPlan(), 2);
    const plan::Estimate& third = want.plans[2];
    QCOMPARE(v.memorySeries()->barSets()[3]->at(0), third.stages[0].activations / kGiB);
    QVERIFY(v.whyText().contains(QString::fromStdString(want.why[2])));
  }

  void fixedTpStaysInEveryRow() {
    PlanView v;
    fill(v, "gpt3-175b", 1024, 1536);
    QVERIFY(v.setField("tp", "8"));
    press(v);
    QVERIFY(v.table()->rowCount() > 0);
    for (int r = 0; r < v.table()->rowCount(); ++r)
      QCOMPARE(text(v.table(), r, PlanView::kTp), QString("8"));
    plan::SearchOptions o;
    o.top = 10;
    o.tp = 8;
    const plan::PlanResult want = expected("gpt3-175b", 1024, 1536, o);
    QCOMPARE(text(v.table(), 0, PlanView::kTflops),
             QString::number(want.plans.front().tflops_per_gpu, 'f', 1));
  }

  void badInputShowsThePlannersMessage() {
    PlanView v;
    v.resize(1160, 880);
    v.show();
    fill(v, "gpt3-175b", 1024, 1536);
    press(v);
    QVERIFY(v.table()->rowCount() > 0);
    QVERIFY(v.setField("tp", "3"));
    QSignalSpy planned(&v, &PlanView::planned);
    press(v);
    QCOMPARE(planned.size(), 1);
    QCOMPARE(planned.front().front().toBool(), false);
    QVERIFY2(v.message().contains("does not divide"), qPrintable(v.message()));
    QVERIFY(!v.message().contains('\n'));
    QCOMPARE(v.table()->rowCount(), 0);
    QVERIFY(v.memorySeries()->barSets().isEmpty());
    QVERIFY(v.timeSeries()->barSets().isEmpty());
    QVERIFY(v.whyText().isEmpty());
    QVERIFY(!any_dialog());
    save(v, "plan_view_error.png");

    // Fixed again: the message goes.
    QVERIFY(v.setField("tp", "search"));
    press(v);
    QVERIFY(v.message().isEmpty());
    QVERIFY(v.table()->rowCount() > 0);
  }

  void editingAPresetMakesItCustom() {
    PlanView v;
    fill(v, "megatron-7.5b", 64, 512);
    QCOMPARE(v.field("model"), std::optional<std::string>("megatron-7.5b"));
    QCOMPARE(v.field("ffn"), std::nullopt);  // the preset's 4 x hidden
    QVERIFY(v.setField("heads", "33"));      // does not divide hidden 4096
    QCOMPARE(v.field("model"), std::nullopt);
    QCOMPARE(v.field("heads"), std::optional<std::string>("33"));
    QCOMPARE(v.field("hidden"), std::optional<std::string>("4096"));
    press(v);
    QVERIFY(!v.message().isEmpty());
    QCOMPARE(v.table()->rowCount(), 0);
    QVERIFY(v.setField("heads", "32"));
    press(v);
    QVERIFY2(v.message().isEmpty(), qPrintable(v.message()));
    QVERIFY(v.table()->rowCount() > 0);
    // Nothing required left out: the planner names the field.
    QVERIFY(v.setField("layers", "0"));
    press(v);
    QVERIFY2(v.message().contains("layers"), qPrintable(v.message()));
  }

  void sixtyFourStagesAreLabelledSparsely() {
    QCOMPARE(PlanView::stageLabelStep(4), 1);
    QCOMPARE(PlanView::stageLabelStep(16), 1);
    QCOMPARE(PlanView::stageLabelStep(17), 2);
    QCOMPARE(PlanView::stageLabelStep(48), 5);
    QCOMPARE(PlanView::stageLabelStep(64), 4);
    QCOMPARE(PlanView::stageLabelStep(96), 10);
    QCOMPARE(PlanView::stageLabelStep(128), 8);
    PlanView v;
    v.resize(1160, 880);
    v.show();
    QVERIFY(QTest::qWaitForWindowExposed(&v));
    fill(v, "megatron-1t", 3072, 3072);
    QVERIFY(v.setField("pp", "64"));
    press(v);
    QVERIFY2(v.message().isEmpty(), qPrintable(v.message()));
    QCOMPARE(v.memorySeries()->barSets().front()->count(), 64);
    const QStringList labels = v.stageAxis()->categoriesLabels();
    QCOMPARE(labels.size(), 16);
    QCOMPARE(labels.front(), QString("0"));
    QCOMPARE(labels.back(), QString("60"));
    QCOMPARE(v.stageAxis()->min(), -0.5);
    QCOMPARE(v.stageAxis()->max(), 63.5);
    save(v, "plan_view_pp64.png");
  }

  void theMainWindowHasThePlanTab() {
    MainWindow w;
    QCOMPARE(w.views()->tabText(MainWindow::kPlan), QString("Plan"));
    QCOMPARE(w.views()->widget(MainWindow::kPlan), static_cast<QWidget*>(w.planView()));
    // At the window's own size, the tab holds the form and the answer without cutting them.
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.views()->setCurrentIndex(MainWindow::kPlan);
    fill(*w.planView(), "gpt3-175b", 1024, 1536);
    press(*w.planView());
    QVERIFY(w.planView()->table()->rowCount() > 0);
    QVERIFY(w.planView()->width() >= w.planView()->minimumSizeHint().width());
    save(w, "plan_view_window.png");
  }

  // "Open as job": the best 175B layout (pp 4, tp 8, dp 32, ZeRO-1, interleaved) in the editor
  // as a job of this machine's scale, each parallel degree 2 (checked against the plan's own
  // row, not against the mapping code), the status bar saying what was scaled.
  void openAsJobPutsTheLayoutInTheEditor() {
    MainWindow w;
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.views()->setCurrentIndex(MainWindow::kPlan);
    PlanView& v = *w.planView();
    QVERIFY(!v.openJobButton()->isEnabled());  // nothing planned yet
    fill(v, "gpt3-175b", 1024, 1536);
    press(v);
    QVERIFY(v.openJobButton()->isEnabled());
    const plan::Layout& l = v.result().plans.front().layout;
    QTest::mouseClick(v.openJobButton(), Qt::LeftButton);
    QApplication::processEvents();
    const JobSpec& job = w.editor()->job();
    QCOMPARE(job.model.kind, std::string("gpt"));
    QCOMPARE(job.parallel.pp, std::min<int64_t>(l.pp, 2));
    QCOMPARE(job.parallel.tp, std::min<int64_t>(l.tp, 2));
    QCOMPARE(job.parallel.dp, std::min<int64_t>(l.dp, 2));
    QCOMPARE(job.parallel.world_size, job.parallel.pp * job.parallel.tp * job.parallel.dp);
    QCOMPARE(job.parallel.strategy, std::string(l.zero == 0   ? "ddp"
                                                : l.zero == 1 ? "zero1"
                                                              : "zero2"));
    QCOMPARE(job.parallel.schedule, std::string(l.interleave > 1 ? "interleaved" : "1f1b"));
    QVERIFY(validate(job).empty());
    const QString status = w.statusBar()->currentMessage();
    QVERIFY2(status.contains("tp 8 -> 2") || l.tp <= 2, qPrintable(status));
    QVERIFY2(w.windowTitle().contains("not saved"), qPrintable(w.windowTitle()));
    save(w, "plan_view_open_job.png");
  }

  // The limit lines and the time split take the colours both front ends read
  // (engine/telemetry/palette.h), the web page's /plan too: written out here.
  void coloursAreTheSharedPalettes() {
    QCOMPARE(PlanView::usableLineColor(), QColor(0xb7, 0x1c, 0x1c));
    QCOMPARE(PlanView::hbmLineColor(), QColor(0x30, 0x30, 0x30));
    PlanView v;
    QCOMPARE(v.usableLine()->pen().color(), QColor(0xb7, 0x1c, 0x1c));
    QCOMPARE(v.hbmLine()->pen().color(), QColor(0x30, 0x30, 0x30));
  }
};

QTEST_MAIN(TestPlanView)
#include "tst_plan_view.moc"
