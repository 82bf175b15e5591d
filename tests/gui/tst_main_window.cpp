// The whole app as a user drives it, offscreen: open the 2x2x2 job (resources/jobs/gpt-3d.json),
// start it, and watch every view fill from the live run — loss, measured memory beside the plan,
// the communication heat map and table, the timeline — then replay its recording into the same
// views, take the README's screenshots, and see a failed rank marked in the grid with its reason
// (reported by the rank, or a remote worker whose connection ends before it finished: killed),
// and a recorded run whose ranks wait for a straggler: the grid coloured by wait (or compute)
// share, the diagnosis in the status bar and the tooltips, the heat map's metrics.
#include <QtTest>

#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QLineSeries>
#include <QPushButton>
#include <QRegularExpression>
#include <QScatterSeries>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTemporaryDir>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>

#include "engine/telemetry/events.h"
#include "gui/job_editor.h"
#include "gui/job_form.h"
#include "gui/main_window.h"
#include "net/auth.h"
#include "net/publisher.h"
#include "net/recording.h"
#include "tests/common/telemetry_events.h"

using namespace shardlab;
using namespace shardlab::gui;

namespace {

// gpt-3d.json shortened so the test runs in seconds; everything else (2x2x2, ZeRO-1 over dp,
// 4 micro-batches, 1F1B) as shipped.
QString short_3d_job() {
  QFile f(SHARDLAB_SOURCE_DIR "/resources/jobs/gpt-3d.json");
  if (!f.open(QIODevice::ReadOnly)) return {};
  QString text = QString::fromUtf8(f.readAll());
  text.replace(QStringLiteral("\"steps\": 200"), QStringLiteral("\"steps\": 12"));
  text.replace(QStringLiteral("\"eval_every\": 100"), QStringLiteral("\"eval_every\": 6"));
  text.replace(QStringLiteral("\"eval_batches\": 20"), QStringLiteral("\"eval_batches\": 2"));
  return text;
}

using test::make_event;

}  // namespace

class TestMainWindow : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir tmp_;

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    qputenv("SHARDLAB_RUNS_DIR", tmp_.filePath("runs").toLocal8Bit());
  }

  // The toy job in teaching mode from the app: the bar appears, says the run is paused on
  // purpose after the first forward, and each button moves every rank on as it says (the gate's
  // count of the ranks' phases); Run lets the run finish, and the bar goes.
  void teachingRunIsSteppedFromTheApp() {
    MainWindow w;
    w.show();
    QFile f(SHARDLAB_SOURCE_DIR "/resources/jobs/toy.json");
    QVERIFY(f.open(QIODevice::ReadOnly));
    QString text = QString::fromUtf8(f.readAll());
    text.replace("\"parallel\": {", "\"telemetry\": {\"teaching\": true},\n  \"parallel\": {");
    text.replace("\"steps\": 40", "\"steps\": 3");
    w.editor()->setText(text);
    QVERIFY2(w.editor()->validateNow(), qPrintable(w.editor()->problem()));
    QVERIFY(w.teachingBar()->isHidden());
    QSignalSpy finished(w.runController(), &RunController::finished);
    QVERIFY(w.startRun());
    const auto gate = w.runController()->teaching();
    QVERIFY(gate != nullptr);
    QVERIFY(w.teachingBar()->isVisible());
    const auto at = [&](int64_t phases) {
      const TeachingStatus s = gate->status();
      return s.paused && s.passed == phases;
    };
    QTRY_VERIFY_WITH_TIMEOUT(at(1), 30000);
    QTRY_VERIFY_WITH_TIMEOUT(
        w.teachingBar()->bannerText().startsWith("Paused on purpose after the forward of step 1"),
        5000);
    QTest::mouseClick(w.teachingBar()->nextPhaseButton(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(at(2), 30000);
    QTRY_VERIFY_WITH_TIMEOUT(w.teachingBar()->bannerText().contains("the backward of step 1"),
                             5000);
    QTest::mouseClick(w.teachingBar()->nextStepButton(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(at(3), 30000);
    QTRY_VERIFY_WITH_TIMEOUT(w.teachingBar()->bannerText().contains("the update of step 1"), 5000);
    // The app is the viewer: held longer than nothing, it stays held (the gate's timeout is 30 s,
    // so this only shows the app does not step it on by itself).
    QTest::qWait(500);
    QVERIFY(at(3));
    QTest::mouseClick(w.teachingBar()->runButton(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 60000);
    QVERIFY2(finished.front().at(0).toBool(), qPrintable(finished.front().at(1).toString()));
    QVERIFY(w.teachingBar()->isHidden());
  }

  void configureLaunchAndWatchA3dRun() {
    MainWindow w;
    w.show();
    const QString text = short_3d_job();
    QVERIFY(text.contains("\"steps\": 12"));
    w.editor()->setText(text);
    QVERIFY2(w.editor()->validateNow(), qPrintable(w.editor()->problem()));
    // The grid draws the edited job's topology before anything runs.
    QCOMPARE(w.rankGrid()->world(), 8);
    QCOMPARE(w.rankGrid()->topology().pp(), 2);
    QCOMPARE(w.rankGrid()->topology().tp(), 2);
    QCOMPARE(w.memoryView()->model().ranks(), 8);
    QVERIFY(w.memoryView()->model().hasPrediction());

    QSignalSpy finished(w.runController(), &RunController::finished);
    // Live: what the chart and the heat map show while the run is still going (the window's own
    // slot, connected first, has redrawn them when this one runs).
    int live_points = 0;
    connect(w.runController(), &RunController::updated, this, [&] {
      if (finished.isEmpty() && w.runController()->running())
        live_points = std::max(live_points, static_cast<int>(w.lossChart()->series()->count()));
    });
    QVERIFY(w.startRun());
    QVERIFY(!w.startRun());  // one run at a time
    QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 300000);
    QVERIFY2(live_points > 0, "no loss point was drawn while the run was going");
    QVERIFY2(finished.front().at(0).toBool(), qPrintable(finished.front().at(1).toString()));

    // Loss (rank 0's 12 steps) and the evaluations at steps 6 and 12.
    QCOMPARE(w.lossChart()->series()->count(), 12);
    QCOMPARE(w.lossChart()->evalLossSeries()->count(), 2);
    // Memory measured on all 8 ranks, beside the plan.
    for (int r = 0; r < 8; ++r)
      QVERIFY2(w.memoryView()->model().measured(r, MemCategory::params).value_or(0) > 0,
               qPrintable(QString::number(r)));
    // Communication: every rank in the heat map, 12 steps plus the column after the last step
    // (the final evaluation and the end-of-run report gather); tp, pp and dp groups in the table.
    QCOMPARE(w.heatMap()->ranks(), 8);
    QCOMPARE(w.heatMap()->firstStep(), int64_t{1});
    QCOMPARE(w.heatMap()->lastStep(), int64_t{13});
    QVERIFY(w.commTable()->rowCount() > 0);
    const QString table = w.commTable()->csv();
    for (const char* group : {"tp[", "pp[", "dp["}) QVERIFY2(table.contains(group), group);
    // Timeline: a lane per rank over a real window, with busy and idle time.
    QCOMPARE(w.timeline()->ranks(), 8);
    const auto [t0, t1] = w.timeline()->window();
    QVERIFY(t1 > t0);
    QVERIFY(w.timeline()->idleFraction(0) < 1.0);
    // Who holds what: every rank's LAYOUT, drawn as strips (tst_holdings_view checks the drawing).
    QCOMPARE(w.holdingsView()->ranks(), 8);
    for (int r = 0; r < 8; ++r)
      QVERIFY2(w.holdingsView()->hasLayout(r), qPrintable(QString::number(r)));
    QVERIFY(!w.holdingsView()->drawnLanes().empty());
    // Nothing failed, nobody silent at the end.
    for (int r = 0; r < 8; ++r) QCOMPARE(w.rankGrid()->rankFlag(r), RankGrid::Flag::None);
    QVERIFY(w.logText().contains("Recorded to"));

    // The recording replays into the same views: same loss points, same heat map.
    const QString rec = w.runController()->recordingPath();
    const int points = w.lossChart()->series()->count();
    const QString heat = w.heatMap()->csv();
    QVERIFY(w.openRecording(rec));
    QVERIFY(w.replaying());
    QCOMPARE(w.rankGrid()->world(), 8);  // from the workers' HELLOs
    QCOMPARE(w.lossChart()->series()->count(), points);
    QCOMPARE(w.heatMap()->csv(), heat);
    QCOMPARE(w.holdingsView()->ranks(), 8);
    QVERIFY(w.holdingsView()->hasLayout(7));
    // Scrubbing to the start empties the views; back to the end restores them.
    w.replayController()->seek(w.replayController()->startTime() - 1);
    QCOMPARE(w.lossChart()->series()->count(), 0);
    w.replayController()->seek(w.replayController()->endTime());
    QCOMPARE(w.lossChart()->series()->count(), points);

    // Screenshots: one PNG of the window per tab.
    QString error;
    const QString shots = tmp_.filePath("shots");
    QVERIFY2(w.saveScreenshots(shots, &error), qPrintable(error));
    for (const char* name : {"overview", "communication", "timeline", "log", "holdings"}) {
      const QImage image(QDir(shots).filePath(QString::fromLatin1(name) + ".png"));
      QVERIFY2(!image.isNull(), name);
      QCOMPARE(image.size(), w.size());
    }
    QVERIFY(!w.saveScreenshots("/proc/no-such-dir/shots", &error));
    QVERIFY2(error.contains("/proc/no-such-dir/shots"), qPrintable(error));
  }

  void stopEndsALiveRunEarly() {
    MainWindow w;
    QString text = short_3d_job();
    text.replace(QStringLiteral("\"steps\": 12"), QStringLiteral("\"steps\": 100000"));
    w.editor()->setText(text);
    QVERIFY(w.editor()->validateNow());
    QSignalSpy finished(w.runController(), &RunController::finished);
    QVERIFY(w.startRun());
    QTRY_VERIFY_WITH_TIMEOUT(w.lossChart()->series()->count() >= 2, 120000);
    w.stopRun();
    QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 60000);
    QVERIFY(finished.front().at(0).toBool());
    const int steps = w.lossChart()->series()->count();
    QVERIFY2(steps < 1000, qPrintable(QString::number(steps)));
    // Every rank stopped after the same step.
    for (const auto& [rank, state] : w.runController()->model().ranks())
      QCOMPARE(state.step, static_cast<int64_t>(steps));
  }

  void failedAndSilentRanksAreMarkedWithTheReason() {
    // A recording (as a collector writes it) of a 4-rank run in which rank 2 failed and rank 3
    // went quiet while the others carried on.
    const QString path = tmp_.filePath("failed.slrec");
    {
      net::RecordingWriter writer(path.toStdString());
      for (int r = 0; r < 4; ++r) {
        net::Hello h;
        h.rank = r;
        h.world = 4;
        h.dp = 4;
        h.dp_i = r;
        writer.append(h);
      }
      const double t = 1.7e9;
      for (int r = 0; r < 4; ++r)
        writer.append(make_event(r, t, telemetry::JobStateEvent{telemetry::JobState::running, ""}));
      writer.append(make_event(
          2, t + 1,
          telemetry::JobStateEvent{telemetry::JobState::failed, "all_reduce on world timed out"}));
      for (int i = 0; i < 20; ++i)
        for (int r : {0, 1}) writer.append(make_event(r, t + 1 + i, telemetry::HeartbeatEvent{}));
    }
    MainWindow w;
    QVERIFY(w.openRecording(path));
    QCOMPARE(w.rankGrid()->world(), 4);
    QCOMPARE(w.rankGrid()->rankFlag(0), RankGrid::Flag::None);
    QCOMPARE(w.rankGrid()->rankFlag(2), RankGrid::Flag::Failed);
    QVERIFY(w.rankGrid()->rankToolTip(2).contains("all_reduce on world timed out"));
    QCOMPARE(w.rankGrid()->rankFlag(3), RankGrid::Flag::Silent);
    QVERIFY(w.rankGrid()->rankToolTip(3).contains("nothing heard"));

    // Garbage is refused with the file named, and the app carries on.
    const QString junk = tmp_.filePath("junk.slrec");
    QFile f(junk);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("not a recording at all");
    f.close();
    QVERIFY(!w.openRecording(junk));
    QVERIFY(w.logText().contains("junk.slrec"));
  }

  // A 2x1x4 run, recorded: in rank 2's stage its dp peers wait 80 ms of each 200 ms step for it
  // (their collectives name it last), and the other stage is busy 75% of the step against 30%
  // from the start (an uneven layout, net/time_accounting.h, said as such and not as a slow stage).
  // The grid colours by wait share (rank 2, who never waits, stays light), then by compute share
  // (rank 2 darker than its peers); the status bar and the tooltips carry the diagnosis.
  void waitColouringNamesTheStraggler() {
    const Topology topo = Topology::make({2, 1, 4}, 8);
    constexpr int kSlow = 2, kSteps = 14;  // the diagnosis wants 10 past the warm-up
    const int stage = topo.coord(kSlow).pp, busy_stage = 1 - stage;
    auto peers_of = [&](int r) { return topo.group(ParallelDim::Dp, r); };
    const QString path = tmp_.filePath("straggler.slrec");
    // Per rank over the steps the run model accounts (after the warm-up), for the expected shares.
    std::map<int, double> waited, computed;
    constexpr double kAccounted = 0.2 * (kSteps - net::kWarmUpSteps);
    {
      net::RecordingWriter writer(path.toStdString());
      for (int r = 0; r < 8; ++r) {
        const Coord c = topo.coord(r);
        net::Hello h;
        h.job_id = "straggler";
        h.rank = r;
        h.world = 8;
        h.pp = 2;
        h.dp = 4;
        h.pp_i = c.pp;
        h.tp_i = c.tp;
        h.dp_i = c.dp;
        writer.append(h);
      }
      for (int s = 1; s <= kSteps; ++s) {
        const double t = 1.7e9 + s * 0.25;
        for (int r = 0; r < 8; ++r) {
          const bool mine = topo.coord(r).pp == stage;
          // Compute: rank 2 0.12 s, its peers 0.04 s, the busy stage 0.15 s.
          const double fwd = mine ? (r == kSlow ? 0.07 : 0.02) : 0.07;
          const double bwd = mine ? (r == kSlow ? 0.05 : 0.02) : 0.08;
          writer.append(make_event(
              r, t + fwd,
              telemetry::PhaseEvent{topo.coord(r).pp, 0, telemetry::Phase::forward, t, t + fwd}));
          writer.append(
              make_event(r, t + fwd + bwd,
                         telemetry::PhaseEvent{topo.coord(r).pp, 0, telemetry::Phase::backward,
                                               t + fwd, t + fwd + bwd}));
          if (s > net::kWarmUpSteps) computed[r] += fwd + bwd;
          telemetry::CollectiveEvent c;
          c.op = "all_reduce";
          c.group = topo.group_name(ParallelDim::Dp, r);
          c.start = t + fwd + bwd;
          if (mine) {
            c.last_rank = kSlow;
            c.wait = r == kSlow ? 0.0 : 0.08;
          } else {  // nobody holds the busy stage up: the last arrival rotates, waits are tiny
            const std::vector<int> group = peers_of(r);
            c.last_rank = group[static_cast<size_t>(s) % group.size()];
            c.wait = c.last_rank == r ? 0.0 : 0.001;
          }
          c.duration = c.wait + 0.002;
          if (s > net::kWarmUpSteps) waited[r] += c.wait;
          writer.append(make_event(r, c.start + c.duration, c));
          telemetry::StepEvent step;
          step.step = s;
          step.loss = 1.0 / s;
          step.step_seconds = 0.2;
          writer.append(make_event(r, t + 0.2, step));
        }
      }
    }
    MainWindow w;
    w.show();
    QVERIFY(w.openRecording(path));
    QCOMPARE(w.rankGrid()->world(), 8);

    // The diagnosis: rank 2 is the straggler, the other stage costlier by the layout.
    const QString diagnosis = w.diagnosisText();
    QVERIFY2(diagnosis.contains("rank 2 (") && diagnosis.contains("is slow"),
             qPrintable(diagnosis));
    const QString uneven =
        QString("stages are uneven: stage %1 busy 75% against 30%").arg(busy_stage);
    QVERIFY2(diagnosis.contains(uneven), qPrintable(diagnosis));
    QVERIFY2(!diagnosis.contains("bottleneck"), qPrintable(diagnosis));
    auto* label = w.findChild<QLabel*>("diagnosis");
    QVERIFY(label && label->isVisible());
    QCOMPARE(label->text(), diagnosis);
    QCOMPARE(w.rankGrid()->rankFlag(kSlow), RankGrid::Flag::Straggler);
    const QString tip = w.rankGrid()->rankToolTip(kSlow);
    for (const QString& line : diagnosis.split("; ")) QVERIFY2(tip.contains(line), qPrintable(tip));
    for (int r = 0; r < 8; ++r) {
      if (r == kSlow) continue;
      QCOMPARE(w.rankGrid()->rankFlag(r), RankGrid::Flag::None);
      const bool busy = topo.coord(r).pp == busy_stage;
      QCOMPARE(w.rankGrid()->rankToolTip(r).contains(uneven), busy);
      QVERIFY(!w.rankGrid()->rankToolTip(r).contains("is slow"));
    }

    // The grid by wait share (the default): each rank's waits over its step time.
    const std::vector<int> peers = peers_of(kSlow);
    const int peer = peers[0] == kSlow ? peers[1] : peers[0];
    QCOMPARE(w.gridShade(), MainWindow::GridShade::wait);
    QCOMPARE(w.rankGrid()->shareLabel(), QString("wait"));
    for (int r = 0; r < 8; ++r)
      QVERIFY2(std::abs(w.rankGrid()->rankShare(r) - waited[r] / kAccounted) < 1e-6,
               qPrintable(QString::number(r)));
    QCOMPARE(w.rankGrid()->rankShare(kSlow), 0.0);
    QVERIFY(w.rankGrid()->cellFill(kSlow) != w.rankGrid()->cellFill(peer));
    QVERIFY(w.rankGrid()->cellFill(kSlow).lightnessF() > w.rankGrid()->cellFill(peer).lightnessF());
    QVERIFY(!w.rankGrid()->legendRect().isNull());
    QVERIFY2(w.rankGrid()->rankToolTip(peer).contains("wait 40% of step time, last "),
             qPrintable(w.rankGrid()->rankToolTip(peer)));
    if (qEnvironmentVariableIsSet("SHARDLAB_SAVE_VIEWS")) {  // for eyeballing the colours
      w.grab().save(QDir::temp().filePath("gui_wait.png"));
      w.views()->setCurrentIndex(MainWindow::kCommunication);
      w.grab().save(QDir::temp().filePath("gui_wait_heat_map.png"));
      w.views()->setCurrentIndex(MainWindow::kOverview);
    }

    // Switched to compute share in the grid's header: rank 2 is now the darker one.
    auto* shade = w.findChild<QComboBox*>("gridShade");
    QVERIFY(shade);
    shade->setCurrentIndex(shade->findData(static_cast<int>(MainWindow::GridShade::compute)));
    QCOMPARE(w.gridShade(), MainWindow::GridShade::compute);
    QCOMPARE(w.rankGrid()->shareLabel(), QString("compute"));
    for (int r = 0; r < 8; ++r)
      QVERIFY(std::abs(w.rankGrid()->rankShare(r) - computed[r] / kAccounted) < 1e-6);
    QVERIFY(w.rankGrid()->cellFill(kSlow).lightnessF() < w.rankGrid()->cellFill(peer).lightnessF());
    w.setGridShade(MainWindow::GridShade::wait);
    QCOMPARE(shade->currentData().toInt(), static_cast<int>(MainWindow::GridShade::wait));
    QCOMPARE(w.rankGrid()->rankShare(kSlow), 0.0);

    // The heat map: wait by default, compute from its header's switch.
    QCOMPARE(w.heatMap()->metric(), net::StepMetric::wait);
    QVERIFY(std::abs(w.heatMap()->cellSeconds(peer, 3) - 0.08) < 1e-6);
    QCOMPARE(w.heatMap()->cellSeconds(kSlow, 3), 0.0);
    auto* metric = w.findChild<QComboBox*>("heatMetric");
    QVERIFY(metric);
    metric->setCurrentIndex(metric->findData(static_cast<int>(net::StepMetric::compute)));
    QCOMPARE(w.heatMap()->metric(), net::StepMetric::compute);
    QVERIFY(std::abs(w.heatMap()->cellSeconds(kSlow, 3) - 0.12) < 1e-6);
    QVERIFY(std::abs(w.heatMap()->cellSeconds(peer, 3) - 0.04) < 1e-6);
    w.setHeatMetric(net::StepMetric::transfer);
    QCOMPARE(metric->currentData().toInt(), static_cast<int>(net::StepMetric::transfer));
    QVERIFY(std::abs(w.heatMap()->cellSeconds(kSlow, 3) - 0.002) < 1e-6);

    // Scrubbing back to the fifth step: too few steps to name anybody.
    w.replayController()->seek(1.7e9 + 0.25 * 5 + 0.21);
    QVERIFY2(w.diagnosisText().isEmpty(), qPrintable(w.diagnosisText()));
    QVERIFY(!label->isVisible());
    QCOMPARE(w.rankGrid()->rankFlag(kSlow), RankGrid::Flag::None);
    QVERIFY(!w.rankGrid()->rankToolTip(kSlow).contains("is slow"));
  }

  // A remote run: workers stream to the app's collector. Rank 2's process ends without saying it
  // finished (killed: its connection just closes) and is marked failed at once with the reason in
  // its tooltip; rank 3, which said it finished before closing, is not.
  void aRemoteRankThatDiesIsMarkedFailed() {
    MainWindow w;
    w.editor()->setText(short_3d_job());
    JobForm* form = w.editor()->form();
    auto* backend = qobject_cast<QComboBox*>(form->fieldWidget("parallel.backend"));
    auto* listen = form->findChild<QLineEdit*>("listenAddress");
    QVERIFY(backend && listen);
    backend->setCurrentIndex(int(LaunchChoice::remote));
    listen->setText("127.0.0.1:0");
    QVERIFY(w.editor()->validateNow());
    QVERIFY(w.startRun());
    const QRegularExpressionMatch where =
        QRegularExpression(R"(--telemetry 127\.0\.0\.1:(\d+) --token-file (\S+))")
            .match(w.remoteMpirunCommand());
    QVERIFY2(where.hasMatch(), qPrintable(w.remoteMpirunCommand()));
    QCOMPARE(w.rankGrid()->world(), 8);

    auto publisher = [&](int rank) {
      net::PublisherOptions o;
      o.port = static_cast<uint16_t>(where.captured(1).toUInt());
      o.token = net::read_token_file(where.captured(2).toStdString());
      o.hello.job_id = "gpt-3d";
      o.hello.rank = rank;
      o.hello.world = 8;
      o.heartbeat = std::chrono::hours(1);
      return std::make_unique<net::Publisher>(o);
    };
    auto event = [](telemetry::Payload payload) {
      telemetry::Event e;
      e.time = telemetry::now_seconds();
      e.payload = std::move(payload);
      return e;
    };
    auto dies = publisher(2);
    auto finishes = publisher(3);
    for (auto* p : {dies.get(), finishes.get()}) {
      p->publish(event(telemetry::JobStateEvent{telemetry::JobState::running, ""}));
      for (int64_t s = 1; s <= 3; ++s) {
        telemetry::StepEvent step;
        step.step = s;
        step.loss = 2.0;
        step.step_seconds = 0.01;
        p->publish(event(step));
      }
    }
    QTRY_VERIFY_WITH_TIMEOUT(w.runController()->model().ranks().size() == 2 &&
                                 w.runController()->model().ranks().at(2).step == 3,
                             10000);
    QCOMPARE(w.rankGrid()->rankFlag(2), RankGrid::Flag::None);
    finishes->publish(event(telemetry::JobStateEvent{telemetry::JobState::finished, ""}));
    finishes->close();
    dies->close();  // no final state: as the kernel closes a killed worker's socket
    QTRY_COMPARE_WITH_TIMEOUT(w.rankGrid()->rankFlag(2), RankGrid::Flag::Failed, 10000);
    const QString tip = w.rankGrid()->rankToolTip(2);
    QVERIFY2(tip.contains("connection closed before the rank finished (killed or crashed?)"),
             qPrintable(tip));
    QVERIFY2(w.logText().contains("rank 2 failed: connection closed"), qPrintable(w.logText()));
    QCOMPARE(w.runController()->model().ranks().at(3).state, telemetry::JobState::finished);
    QCOMPARE(w.rankGrid()->rankFlag(3), RankGrid::Flag::None);
    QVERIFY(w.runController()->running());  // six ranks of eight have not come yet
    w.stopRun();
    QVERIFY(!w.runController()->running());
  }
};

QTEST_MAIN(TestMainWindow)
#include "tst_main_window.moc"
