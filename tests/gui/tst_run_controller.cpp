// The app's run controller, offscreen, on real jobs (no mocks), in its three modes:
// - threads: fashion_mlp.json (ZeRO-2 on 4 thread ranks) shortened to 30 steps runs to the end and
//   records itself; every rank reports 30 losses and its memory; the loss chart and the memory
//   view draw what the controller collected. stop() on a long job ends every rank after the same
//   step with finished(true). A missing data directory ends with finished(false) naming the
//   path; strategy "none" and a mode that does not match parallel.backend are refused.
// - mpirun: the same job with backend mpi as 4 `shardlab worker` processes under a real mpirun,
//   streaming to the controller's collector; stop() ends it within seconds and leaves no worker.
// - remote: the controller listens; the test runs the exact command it shows (as a user would on
//   a cluster) and the workers connect and finish.
#include <QtTest>

#include <QElapsedTimer>
#include <QLineSeries>
#include <QProcess>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>

#include <csignal>
#include <memory>
#include <set>

#include "engine/job/job_spec.h"
#include "gui/loss_chart.h"
#include "gui/memory_view.h"
#include "gui/run_controller.h"
#include "net/run_model.h"

using namespace shardlab;
using namespace shardlab::gui;

namespace {

JobSpec short_job(std::vector<std::string> extra = {}, int steps = 30) {
  std::vector<std::string> overrides{"train.steps=" + std::to_string(steps), "train.log_every=10",
                                     "train.eval_every=0", "train.eval_batches=1"};
  for (std::string& s : extra) overrides.push_back(std::move(s));
  return load_job(SHARDLAB_SOURCE_DIR "/resources/jobs/fashion_mlp.json", overrides);
}

bool have_mpirun() {
  return !QStandardPaths::findExecutable("mpirun").isEmpty();
}

// The `shardlab worker` processes still running this job file (pgrep -f).
QStringList workers_of(const QString& job_file) {
  QProcess p;
  p.start("pgrep", {"-f", "-a", "worker " + job_file});
  p.waitForFinished(10000);
  return QString::fromUtf8(p.readAllStandardOutput()).split('\n', Qt::SkipEmptyParts);
}

}  // namespace

class TestRunController : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir tmp_;

  // Starts a long 4-rank mpi job (job file `name` in the temp dir) in mpirun mode and returns once
  // a rank has reported a step (a failed start fails the calling test).
  void startLongMpirunJob(RunController& run, QSignalSpy& finished, LaunchOptions& o,
                          const char* name) {
    const JobSpec job = short_job({"parallel.backend=mpi"}, 100000);
    o.mode = LaunchMode::mpirun;
    o.shardlab_path = SHARDLAB_CLI;
    o.record_path = "-";
    o.job_file = tmp_.filePath(name);
    bool stepping = false;
    const auto watch = connect(&run, &RunController::updated, this, [&] {
      for (const auto& [rank, state] : run.model().ranks())
        if (state.step > 0) stepping = true;
    });
    QVERIFY2(run.start(job, o), qPrintable(run.lastError()));
    QTRY_VERIFY_WITH_TIMEOUT(stepping || !finished.isEmpty(), 180000);
    disconnect(watch);
    if (!finished.isEmpty()) QFAIL(qPrintable(finished.first().at(1).toString()));
  }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    // Default recordings and job files go here, not into the source tree.
    qputenv("SHARDLAB_RUNS_DIR", tmp_.filePath("runs").toLocal8Bit());
  }

  void runsAThreadsJobAndFeedsTheViews() {
    const JobSpec job = short_job();
    QCOMPARE(job.parallel.strategy, std::string("zero2"));
    QCOMPARE(job.parallel.world_size, int64_t{4});
    RunController run;
    QSignalSpy finished(&run, &RunController::finished);
    QSignalSpy updated(&run, &RunController::updated);
    QVERIFY2(run.start(job), qPrintable(run.lastError()));
    QVERIFY(!run.start(job));  // one run at a time
    QVERIFY(run.running());
    // Recorded by default into the runs folder, named like `shardlab run` names it.
    const QString rec = run.recordingPath();
    QVERIFY2(rec.startsWith(tmp_.filePath("runs") + "/") && rec.endsWith(".slrec"),
             qPrintable(rec));
    QVERIFY2(rec.contains("fashion-mlp"), qPrintable(rec));
    QVERIFY(finished.wait(120000));
    QCOMPARE(finished.count(), 1);
    const QList<QVariant> args = finished.takeFirst();
    QVERIFY2(args.at(0).toBool(), qPrintable(args.at(1).toString()));
    QVERIFY(updated.count() >= 1);
    QVERIFY(!run.running());
    QVERIFY(QFileInfo(rec).size() > 1000);

    const net::RunModel& model = run.model();
    QCOMPARE(model.ranks().size(), size_t{4});
    for (const auto& [rank, state] : model.ranks()) {
      QCOMPARE(state.loss_series.size(), size_t{30});
      QCOMPARE(state.step, int64_t{30});
      QVERIFY(state.memory[static_cast<size_t>(MemCategory::grads)] > 0);
      QCOMPARE(state.state, telemetry::JobState::finished);
      QVERIFY(state.hello.has_value());  // coordinates for the rank grid
      QCOMPARE(state.hello->rank, rank);
      QCOMPARE(state.hello->dp_i, rank);
      QCOMPARE(state.hello->world, 4);
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

  void noRecordingWithDash() {
    RunController run;
    QSignalSpy finished(&run, &RunController::finished);
    LaunchOptions o;
    o.record_path = "-";
    QVERIFY2(run.start(short_job({}, 3), o), qPrintable(run.lastError()));
    QVERIFY(run.recordingPath().isEmpty());
    QVERIFY(finished.wait(120000));
    QVERIFY(finished.takeFirst().at(0).toBool());
  }

  void stopEndsEveryRankAfterTheSameStep() {
    const int steps = 3000;
    RunController run;
    QSignalSpy finished(&run, &RunController::finished);
    bool asked = false;
    connect(&run, &RunController::updated, this, [&] {
      if (asked) return;
      for (const auto& [rank, state] : run.model().ranks())
        if (state.step > 0) {
          asked = true;
          run.stop();
          run.stop();  // idempotent
          return;
        }
    });
    LaunchOptions o;
    o.record_path = tmp_.filePath("stopped.slrec");
    QVERIFY2(run.start(short_job({}, steps), o), qPrintable(run.lastError()));
    QVERIFY(finished.wait(120000));
    QVERIFY(asked);
    const QList<QVariant> args = finished.takeFirst();
    QVERIFY2(args.at(0).toBool(), qPrintable(args.at(1).toString()));
    QVERIFY2(args.at(1).toString().startsWith("stopped after"), qPrintable(args.at(1).toString()));
    const net::RunModel& model = run.model();
    QCOMPARE(model.ranks().size(), size_t{4});
    const int64_t last = model.ranks().at(0).step;
    QVERIFY(last >= 1);
    QVERIFY2(last < steps, qPrintable(QString::number(last)));
    QVERIFY2(args.at(1).toString().contains(QString("stopped after %1 steps").arg(last)),
             qPrintable(args.at(1).toString()));
    for (const auto& [rank, state] : model.ranks()) {
      QCOMPARE(state.step, last);
      QCOMPARE(state.loss_series.size(), static_cast<size_t>(last));
      QCOMPARE(state.state, telemetry::JobState::finished);
    }
    run.stop();  // not running: nothing happens
    QCOMPARE(finished.count(), 0);
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

  void modeMustMatchTheBackend() {
    RunController run;
    QSignalSpy finished(&run, &RunController::finished);
    LaunchOptions o;
    o.record_path = "-";
    o.mode = LaunchMode::threads;
    QVERIFY(!run.start(short_job({"parallel.backend=mpi"}), o));
    QVERIFY2(run.lastError().contains("parallel.backend"), qPrintable(run.lastError()));
    for (LaunchMode mode : {LaunchMode::mpirun, LaunchMode::remote}) {
      o.mode = mode;
      o.listen = "127.0.0.1:0";
      QVERIFY(!run.start(short_job(), o));
      QVERIFY2(run.lastError().contains("parallel.backend"), qPrintable(run.lastError()));
      QVERIFY(run.remoteCommand(false).isEmpty());
    }
    QVERIFY(!run.running());
    QCOMPARE(finished.count(), 0);
  }

  void mpirunModeRunsWorkers() {
    if (!have_mpirun()) QSKIP("mpirun not found (apt-get install openmpi-bin)");
    const JobSpec job = short_job({"parallel.backend=mpi"}, 20);
    RunController run;
    QSignalSpy finished(&run, &RunController::finished);
    QSignalSpy connected(&run, &RunController::workerConnected);
    QSignalSpy lines(&run, &RunController::logLine);
    LaunchOptions o;
    o.mode = LaunchMode::mpirun;
    o.shardlab_path = SHARDLAB_CLI;
    o.record_path = tmp_.filePath("mpirun.slrec");
    QVERIFY2(run.start(job, o), qPrintable(run.lastError()));
    QVERIFY(run.port() > 0);
    QVERIFY(run.remoteCommand(false).isEmpty());
    QCOMPARE(run.recordingPath(), tmp_.filePath("mpirun.slrec"));
    QVERIFY(finished.wait(240000));
    QStringList log;
    for (const QList<QVariant>& l : lines) log << l.at(0).toString();
    const QList<QVariant> args = finished.takeFirst();
    QVERIFY2(args.at(0).toBool(), qPrintable(args.at(1).toString() + "\n" + log.join("\n")));
    std::set<int> ranks;
    for (const QList<QVariant>& c : connected) ranks.insert(c.at(0).toInt());
    QCOMPARE(ranks, (std::set<int>{0, 1, 2, 3}));
    QVERIFY2(lines.count() > 1, qPrintable(log.join("\n")));
    // Rank 0's progress lines came through mpirun's output.
    QVERIFY2(log.join("\n").contains("step"), qPrintable(log.join("\n")));
    // The command line (logged first) carries no token: it travels in the environment.
    QVERIFY2(log.first().startsWith("$ ") && log.first().contains(" worker "),
             qPrintable(log.first()));
    QVERIFY(!log.join("\n").contains(QRegularExpression("[0-9a-f]{64}")));
    const net::RunModel& model = run.model();
    QCOMPARE(model.ranks().size(), size_t{4});
    for (const auto& [rank, state] : model.ranks()) {
      QCOMPARE(state.loss_series.size(), size_t{20});
      QCOMPARE(state.step, int64_t{20});
      QCOMPARE(state.state, telemetry::JobState::finished);
      QVERIFY(state.hello.has_value());
      QVERIFY(state.collectives > 0);
    }
    QVERIFY(model.all_done());
    QVERIFY(QFileInfo(run.recordingPath()).size() > 1000);
  }

  // The Hosts field (mpirun mode): a bad list, too few slots and an unknown host are refused with
  // the reason; "localhost:4" runs the job through the hosts path (Open MPI's --host, the cluster
  // settings, the token forwarded with -x, the collector on the address towards the host). Runs
  // on other hosts are tested with `shardlab run --hosts` on network namespaces (tests/cluster),
  // which builds mpirun's arguments with the same launch::cluster_mpirun_args.
  void mpirunModeTakesHosts() {
    if (!have_mpirun()) QSKIP("mpirun not found (apt-get install openmpi-bin)");
    RunController run;
    QSignalSpy finished(&run, &RunController::finished);
    QSignalSpy lines(&run, &RunController::logLine);
    LaunchOptions o;
    o.mode = LaunchMode::mpirun;
    o.shardlab_path = SHARDLAB_CLI;
    o.record_path = "-";
    const JobSpec job = short_job({"parallel.backend=mpi"}, 5);
    const std::pair<const char*, const char*> bad[] = {
        {"h1:0", "Hosts: 'h1:0' wants HOST:SLOTS with SLOTS from 1 to 4096"},
        {"localhost:1", "Hosts: localhost:1 gives 1 slots, but the job has 4 ranks"},
        {"no-such-host.invalid:4", "host no-such-host.invalid: cannot resolve it"},
    };
    for (const auto& [hosts, why] : bad) {
      o.hosts = hosts;
      QVERIFY(!run.start(job, o));
      QVERIFY2(run.lastError().contains(why), qPrintable(run.lastError()));
      QVERIFY(!run.running());
    }
    o.hosts = "localhost:4";
    QVERIFY2(run.start(job, o), qPrintable(run.lastError()));
    QVERIFY(finished.wait(240000));
    QStringList log;
    for (const QList<QVariant>& l : lines) log << l.at(0).toString();
    QVERIFY2(finished.first().at(0).toBool(), qPrintable(log.join("\n")));
    QVERIFY2(log.first().contains(" --host localhost:4 ") &&
                 log.first().contains(" -x SHARDLAB_TELEMETRY_TOKEN ") &&
                 log.first().contains(" oob_tcp_keepalive_time 5 "),
             qPrintable(log.first()));
    QCOMPARE(run.model().ranks().size(), size_t{4});
    QVERIFY(run.model().all_done());
  }

  void stopInMpirunModeLeavesNoWorker() {
    if (!have_mpirun()) QSKIP("mpirun not found (apt-get install openmpi-bin)");
    RunController run;
    QSignalSpy finished(&run, &RunController::finished);
    LaunchOptions o;
    startLongMpirunJob(run, finished, o, "stop-me.json");
    if (QTest::currentTestFailed()) return;
    QVERIFY(!workers_of(o.job_file).isEmpty());  // the check below can fail
    QElapsedTimer clock;
    clock.start();
    run.stop();
    QVERIFY(run.running());  // until mpirun has gone
    QVERIFY(finished.wait(15000));
    QVERIFY2(clock.elapsed() < 11000, qPrintable(QString::number(clock.elapsed())));
    const QList<QVariant> args = finished.takeFirst();
    QVERIFY(!args.at(0).toBool());
    QCOMPARE(args.at(1).toString(), QString("stopped by the user"));
    QVERIFY(!run.running());
    QTRY_VERIFY2_WITH_TIMEOUT(workers_of(o.job_file).isEmpty(),
                              qPrintable(workers_of(o.job_file).join("\n")), 3000);
    // The ranks the stop took away are marked failed with the reason (the grid shows it).
    QVERIFY(!run.model().ranks().empty());
    for (const auto& [rank, state] : run.model().ranks()) {
      QCOMPARE(state.state, telemetry::JobState::failed);
      QVERIFY2(QString::fromStdString(state.reason).contains("stopped by the user"),
               state.reason.c_str());
    }
  }

  // A worker killed from outside (as the OOM killer would): mpirun ends the job, the run fails
  // with mpirun's status, and every rank that did not finish is marked failed; the killed one
  // with its lost connection as the reason.
  void aKilledWorkerFailsTheRunAndMarksItsRanks() {
    if (!have_mpirun()) QSKIP("mpirun not found (apt-get install openmpi-bin)");
    RunController run;
    QSignalSpy finished(&run, &RunController::finished);
    LaunchOptions o;
    startLongMpirunJob(run, finished, o, "kill-one.json");
    if (QTest::currentTestFailed()) return;
    // A worker, not mpirun itself (whose command line names the worker's too).
    QStringList workers;
    for (const QString& w : workers_of(o.job_file))
      if (!w.section(' ', 1, 1).endsWith("mpirun")) workers << w;
    QVERIFY(!workers.isEmpty());
    const qint64 victim = workers.front().section(' ', 0, 0).toLongLong();
    QVERIFY(victim > 0);
    QCOMPARE(::kill(static_cast<pid_t>(victim), SIGKILL), 0);
    QVERIFY(finished.wait(120000));
    QVERIFY(!finished.front().at(0).toBool());
    const QString why = finished.front().at(1).toString();
    QVERIFY2(why.contains("mpirun"), qPrintable(why));
    QCOMPARE(run.model().ranks().size(), size_t{4});
    for (const auto& [rank, state] : run.model().ranks())
      QCOMPARE(state.state, telemetry::JobState::failed);
    // The killed rank (known by its HELLO's pid) is failed because its connection ended before
    // it finished: the collector saw that at once, long before mpirun exited.
    bool found = false;
    for (const auto& [rank, state] : run.model().ranks())
      if (state.hello && state.hello->pid == victim) {
        found = true;
        QVERIFY2(state.connection_lost, state.reason.c_str());
        QVERIFY2(state.reason.find("before the rank finished") != std::string::npos,
                 state.reason.c_str());
      }
    QVERIFY2(found, qPrintable(workers.join("\n")));
    QTRY_VERIFY2_WITH_TIMEOUT(workers_of(o.job_file).isEmpty(),
                              qPrintable(workers_of(o.job_file).join("\n")), 10000);
  }

  // The destructor never hangs: a threads run is stopped and joined, mpirun and its ranks end.
  void destroyingTheControllerEndsItsRun() {
    for (LaunchMode mode : {LaunchMode::threads, LaunchMode::mpirun}) {
      if (mode == LaunchMode::mpirun && !have_mpirun()) continue;
      auto run = std::make_unique<RunController>();
      LaunchOptions o;
      o.mode = mode;
      o.shardlab_path = SHARDLAB_CLI;
      o.record_path = "-";
      o.job_file = tmp_.filePath("destroy-me.json");
      const JobSpec job = mode == LaunchMode::threads ? short_job({}, 100000)
                                                      : short_job({"parallel.backend=mpi"}, 100000);
      QVERIFY2(run->start(job, o), qPrintable(run->lastError()));
      bool stepping = false;
      connect(run.get(), &RunController::updated, this, [&] {
        for (const auto& [rank, state] : run->model().ranks())
          if (state.step > 0) stepping = true;
      });
      QTRY_VERIFY_WITH_TIMEOUT(stepping, 180000);
      QVERIFY(run->running());
      if (mode == LaunchMode::mpirun) QVERIFY(!workers_of(o.job_file).isEmpty());
      QElapsedTimer clock;
      clock.start();
      run.reset();
      QVERIFY2(clock.elapsed() < 10000, qPrintable(QString::number(clock.elapsed())));
      if (mode == LaunchMode::mpirun)
        QTRY_VERIFY2_WITH_TIMEOUT(workers_of(o.job_file).isEmpty(),
                                  qPrintable(workers_of(o.job_file).join("\n")), 3000);
    }
  }

  void remoteModeShowsTheCommandToRun() {
    if (!have_mpirun()) QSKIP("mpirun not found (apt-get install openmpi-bin)");
    const JobSpec job = short_job({"parallel.backend=mpi"}, 15);
    RunController run;
    QSignalSpy finished(&run, &RunController::finished);
    QSignalSpy connected(&run, &RunController::workerConnected);
    LaunchOptions o;
    o.mode = LaunchMode::remote;
    o.listen = "127.0.0.1:0";
    o.shardlab_path = SHARDLAB_CLI;
    o.job_file = tmp_.filePath("remote.json");
    o.token_file = tmp_.filePath("remote.token");
    o.record_path = tmp_.filePath("remote.slrec");
    QVERIFY2(run.start(job, o), qPrintable(run.lastError()));
    QVERIFY(run.port() > 0);
    const QString command = run.remoteCommand(false);
    QCOMPARE(command, QString("mpirun -np 4 %1 worker %2 --telemetry 127.0.0.1:%3 --token-file %4")
                          .arg(SHARDLAB_CLI, o.job_file)
                          .arg(run.port())
                          .arg(o.token_file));
    // The srun line is launch::srun_argv's, the one tst_slurm runs on a real Slurm cluster.
    QCOMPARE(run.remoteCommand(true),
             QString(command).replace("mpirun -np 4", "srun --mpi=pmix -n 4"));
    QCOMPARE(QFile::permissions(o.token_file), QFileDevice::ReadOwner | QFileDevice::WriteOwner |
                                                   QFileDevice::ReadUser | QFileDevice::WriteUser);
    QVERIFY(QFileInfo(o.job_file).size() > 0);

    QProcess cluster;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("OMPI_ALLOW_RUN_AS_ROOT", "1");
    env.insert("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    env.insert("OMPI_MCA_rmaps_base_oversubscribe", "1");  // 4 ranks on a small machine
    env.remove("SHARDLAB_TELEMETRY_TOKEN");                // the token file must do
    cluster.setProcessEnvironment(env);
    cluster.setProcessChannelMode(QProcess::MergedChannels);
    cluster.start("bash", {"-c", command});
    QVERIFY(cluster.waitForStarted(10000));
    QVERIFY(finished.wait(240000));
    const QList<QVariant> args = finished.takeFirst();
    QVERIFY2(cluster.state() == QProcess::NotRunning || cluster.waitForFinished(60000),
             "the workers did not end");
    const QString out = QString::fromUtf8(cluster.readAll());
    QVERIFY2(args.at(0).toBool(), qPrintable(args.at(1).toString() + "\n" + out));
    QCOMPARE(cluster.exitCode(), 0);
    std::set<int> ranks;
    for (const QList<QVariant>& c : connected) ranks.insert(c.at(0).toInt());
    QCOMPARE(ranks, (std::set<int>{0, 1, 2, 3}));
    for (const auto& [rank, state] : run.model().ranks()) {
      QCOMPARE(state.step, int64_t{15});
      QCOMPARE(state.state, telemetry::JobState::finished);
    }
    QVERIFY(!run.running());
    QVERIFY(QFileInfo(o.record_path).size() > 1000);
  }

  void remoteStopStopsListening() {
    RunController run;
    QSignalSpy finished(&run, &RunController::finished);
    LaunchOptions o;
    o.mode = LaunchMode::remote;
    o.listen = "127.0.0.1:0";
    o.token_file = tmp_.filePath("idle.token");
    o.job_file = tmp_.filePath("idle.json");
    o.record_path = "-";
    QVERIFY2(run.start(short_job({"parallel.backend=mpi"}), o), qPrintable(run.lastError()));
    QVERIFY(run.remoteCommand(true).startsWith("srun --mpi=pmix -n 4 shardlab worker "));
    run.stop();
    QCOMPARE(finished.count(), 1);
    const QList<QVariant> args = finished.takeFirst();
    QVERIFY(!args.at(0).toBool());
    QVERIFY2(args.at(1).toString().startsWith("stopped listening"),
             qPrintable(args.at(1).toString()));
    QVERIFY(!run.running());
  }
};

QTEST_MAIN(TestRunController)
#include "tst_run_controller.moc"
