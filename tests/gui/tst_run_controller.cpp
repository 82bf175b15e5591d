// The app's run controller, offscreen, on a real job (no mocks): fashion_mlp.json (ZeRO-2 on 4
// thread ranks) shortened to 30 steps runs to the end; every rank reports 30 losses and its
// memory; the loss chart and the memory view draw what the controller collected. A job whose data
// directory is missing ends with finished(false) naming the path, and strategy "none" is refused.
#include <QtTest>

#include <QLineSeries>
#include <QSignalSpy>

#include "engine/job/job_spec.h"
#include "gui/loss_chart.h"
#include "gui/memory_view.h"
#include "gui/run_controller.h"
#include "net/run_model.h"

using namespace shardlab;
using namespace shardlab::gui;

namespace {

JobSpec short_job(std::vector<std::string> extra = {}) {
  std::vector<std::string> overrides{"train.steps=30", "train.log_every=10", "train.eval_every=0",
                                     "train.eval_batches=1"};
  for (std::string& s : extra) overrides.push_back(std::move(s));
  return load_job(SHARDLAB_SOURCE_DIR "/resources/jobs/fashion_mlp.json", overrides);
}

}  // namespace

class TestRunController : public QObject {
  Q_OBJECT
 private slots:
  void runsAThreadsJobAndFeedsTheViews() {
    const JobSpec job = short_job();
    QCOMPARE(job.parallel.strategy, std::string("zero2"));
    QCOMPARE(job.parallel.world_size, int64_t{4});
    RunController run;
    QSignalSpy finished(&run, &RunController::finished);
    QSignalSpy updated(&run, &RunController::updated);
    QVERIFY2(run.start(job), qPrintable(run.lastError()));
    QVERIFY(!run.start(job));  // one run at a time
    QVERIFY(finished.wait(120000));
    QCOMPARE(finished.count(), 1);
    const QList<QVariant> args = finished.takeFirst();
    QVERIFY2(args.at(0).toBool(), qPrintable(args.at(1).toString()));
    QVERIFY(updated.count() >= 1);
    QVERIFY(!run.running());

    const net::RunModel& model = run.model();
    QCOMPARE(model.ranks().size(), size_t{4});
    for (const auto& [rank, state] : model.ranks()) {
      QCOMPARE(state.loss_series.size(), size_t{30});
      QCOMPARE(state.step, int64_t{30});
      QVERIFY(state.memory[static_cast<size_t>(MemCategory::grads)] > 0);
      QCOMPARE(state.state, telemetry::JobState::finished);
    }

    LossChart chart;
    chart.update(model);
    const std::vector<double>& loss = model.ranks().at(0).loss_series;
    QCOMPARE(chart.series()->count(), 30);
    const QList<QPointF> points = chart.series()->points();
    for (int i = 0; i < 30; ++i) {
      QCOMPARE(points[i].x(), double(i + 1));
      QCOMPARE(points[i].y(), loss[static_cast<size_t>(i)]);
    }

    MemoryView memory;
    memory.setJob(job);
    memory.setMeasured(model);
    for (int r = 0; r < 4; ++r) {
      const auto grads = memory.model().measured(r, MemCategory::grads);
      QVERIFY(grads.has_value());
      QCOMPARE(*grads, model.ranks().at(r).memory[static_cast<size_t>(MemCategory::grads)]);
    }
  }

  void missingDataFailsWithThePath() {
    const JobSpec job = short_job({"data.path=/nonexistent"});
    RunController run;
    QSignalSpy finished(&run, &RunController::finished);
    QVERIFY2(run.start(job), qPrintable(run.lastError()));
    QVERIFY(finished.wait(120000));
    const QList<QVariant> args = finished.takeFirst();
    QVERIFY(!args.at(0).toBool());
    QVERIFY2(args.at(1).toString().contains("/nonexistent"), qPrintable(args.at(1).toString()));
  }

  void strategyNoneIsRefused() {
    JobSpec job = short_job();
    job.parallel = ParallelConfig{};
    job.parallel.strategy = "none";
    RunController run;
    QSignalSpy finished(&run, &RunController::finished);
    QVERIFY(!run.start(job));
    QVERIFY(run.lastError().contains("none"));
    QVERIFY(!run.running());
    QCOMPARE(finished.count(), 0);
  }
};

QTEST_MAIN(TestRunController)
#include "tst_run_controller.moc"
