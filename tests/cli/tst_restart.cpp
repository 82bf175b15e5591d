// `shardlab run JOB --max-restarts N` with real processes: a worker killed mid-run is restarted
// from the last checkpoint and the run ends with the uninterrupted run's parameters, bit for bit;
// a failure that repeats gives up after N restarts with the last error; bad flags are one line.
// Every process these tests start is gone when they end.
#include <QtTest>

#include <cerrno>
#include <csignal>
#include <cstring>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QThread>

namespace {

struct Outcome {
  int exit_code = -1;
  QProcess::ExitStatus status = QProcess::CrashExit;
  QString out, err;
};

QProcessEnvironment cli_env(const QString& runs_dir) {
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("OMPI_ALLOW_RUN_AS_ROOT", "1");
  env.insert("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
  env.insert("SHARDLAB_RUNS_DIR", runs_dir);
  return env;
}

Outcome finish(QProcess& p, int timeout_ms) {
  Outcome o;
  if (!p.waitForFinished(timeout_ms)) {
    p.kill();
    p.waitForFinished(5000);
    o.err = "timed out\n";
  } else {
    o.exit_code = p.exitCode();
    o.status = p.exitStatus();
  }
  o.out = QString::fromUtf8(p.readAllStandardOutput());
  o.err += QString::fromUtf8(p.readAllStandardError());
  return o;
}

// The argv of every process (but this one) whose command line mentions `needle`.
QMap<qint64, QList<QByteArray>> processes_mentioning(const QByteArray& needle) {
  QMap<qint64, QList<QByteArray>> found;
  for (const QString& entry : QDir("/proc").entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
    bool numeric = false;
    const qint64 pid = entry.toLongLong(&numeric);
    if (!numeric || pid == QCoreApplication::applicationPid()) continue;
    QFile f("/proc/" + entry + "/cmdline");
    if (!f.open(QIODevice::ReadOnly)) continue;
    const QByteArray cmdline = f.readAll();
    if (cmdline.contains(needle)) found.insert(pid, cmdline.split('\0'));
  }
  return found;
}

const QString kMlpJob = "resources/jobs/fashion_mlp.json";
// killedWorkerResumesFromLastCheckpoint: the first checkpoint comes at step 20, and a run this
// long (a checkpoint every 20 steps) goes on for several seconds after it, even unloaded.
constexpr int kKillSteps = 600;

}  // namespace

class TestRestart : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir tmp_;

  QStringList mpi_job(int steps, const QString& ckdir) const {
    return {"run",   kMlpJob,
            "--set", "parallel.backend=mpi",
            "--set", "parallel.world_size=2",
            "--set", QString("train.steps=%1").arg(steps),
            "--set", "train.log_every=100",
            "--set", "train.eval_every=0",
            "--set", "train.eval_batches=1",
            "--set", "train.checkpoint_dir=" + ckdir,
            "--set", "train.checkpoint_every=20"};
  }

  Outcome run_cli(const QStringList& args, const QProcessEnvironment& env,
                  int timeout_ms = 120000) {
    QProcess p;
    p.setWorkingDirectory(SHARDLAB_SOURCE_DIR);
    p.setProcessEnvironment(env);
    p.start(SHARDLAB_CLI, args);
    return finish(p, timeout_ms);
  }
  Outcome run_cli(const QStringList& args) { return run_cli(args, cli_env(tmp_.filePath("runs"))); }

  // Waits up to `ms` for every process of these tests to be gone; kills (by pid) what is left.
  // Every process these tests start names tmp_ in its command line (`run` and mpirun through
  // train.checkpoint_dir or the launcher script, the workers through the --set mpirun passes
  // on), and tmp_ is a fresh directory of this process (QTemporaryDir's random suffix): other
  // tests' processes (ctest -j) never match, even the same build's workers.
  bool nothing_left(int ms) {
    const QByteArray needle = tmp_.path().toUtf8();
    QElapsedTimer t;
    t.start();
    while (!processes_mentioning(needle).isEmpty() && t.elapsed() < ms) QThread::msleep(50);
    const auto left = processes_mentioning(needle);
    for (qint64 pid : left.keys()) ::kill(static_cast<pid_t>(pid), SIGKILL);
    return left.isEmpty();
  }

  static bool have_mpirun() { return !QStandardPaths::findExecutable("mpirun").isEmpty(); }

 private slots:
  void initTestCase() { QVERIFY(tmp_.isValid()); }
  void cleanup() { QVERIFY2(nothing_left(10000), "processes of this test were left behind"); }

  // A `shardlab worker` SIGKILLed once a checkpoint exists: mpirun fails, `run` prints the restart
  // line naming the checkpoint, the workers resume from it, and the model file is byte for byte
  // the uninterrupted run's.
  void killedWorkerResumesFromLastCheckpoint() {
    if (!have_mpirun()) QSKIP("mpirun not found (apt-get install openmpi-bin)");
    const QString ref_model = tmp_.filePath("straight.slmodel");
    const Outcome ref = run_cli(mpi_job(kKillSteps, tmp_.filePath("ck-straight")) +
                                QStringList{"--no-record", "--save-model", ref_model});
    QVERIFY2(ref.exit_code == 0, qPrintable(ref.out + ref.err));
    QVERIFY2(!ref.err.contains("restart"), qPrintable(ref.err));

    const QString ck = tmp_.filePath("ck-killed");
    const QString model = tmp_.filePath("restarted.slmodel");
    QProcess run;
    run.setWorkingDirectory(SHARDLAB_SOURCE_DIR);
    run.setProcessEnvironment(cli_env(tmp_.filePath("runs")));
    run.start(SHARDLAB_CLI, mpi_job(kKillSteps, ck) + QStringList{"--no-record", "--save-model",
                                                                  model, "--max-restarts", "2"});
    QVERIFY(run.waitForStarted(10000));
    // Once the first checkpoint is complete, kill one worker (argv: shardlab worker JOB ...;
    // mpirun's own command line names the worker too, but not as argv[0]).
    QElapsedTimer t;
    t.start();
    while (!QFile::exists(ck + "/latest") && t.elapsed() < 60000 &&
           run.state() == QProcess::Running)
      QThread::msleep(20);
    QVERIFY2(QFile::exists(ck + "/latest"), "no checkpoint was written");
    qint64 victim = 0;
    const auto procs = processes_mentioning(("train.checkpoint_dir=" + ck).toUtf8());
    for (auto it = procs.begin(); it != procs.end(); ++it)
      if (it.value().value(0) == SHARDLAB_CLI && it.value().value(1) == "worker") victim = it.key();
    QVERIFY2(victim > 0, "no shardlab worker process found");
    // Still the first attempt, mid-run: kKillSteps leaves seconds of training after the first
    // checkpoint, so the kill cannot come after the end (that would test nothing).
    QVERIFY2(run.state() == QProcess::Running,
             "the run ended before a worker could be killed: raise kKillSteps");
    if (::kill(static_cast<pid_t>(victim), SIGKILL) != 0) {
      const int e = errno;
      run.kill();
      run.waitForFinished(5000);
      QFAIL(qPrintable(QString("could not SIGKILL worker %1: %2")
                           .arg(victim)
                           .arg(e == ESRCH ? "it had already exited (the run finished before the "
                                             "kill? raise kKillSteps)"
                                           : strerror(e))));
    }

    const Outcome o = finish(run, 120000);
    QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));
    const QRegularExpression line(
        "shardlab: restart 1/2 from (\\S+/step-(\\d+)) \\(step (\\d+)\\) after: mpirun exited "
        "with status \\d+");
    const QRegularExpressionMatch m = line.match(o.err);
    QVERIFY2(m.hasMatch(), qPrintable(o.err));
    QCOMPARE(m.captured(1).left(ck.size() + 1), ck + "/");
    QCOMPARE(m.captured(2).toLongLong(), m.captured(3).toLongLong());
    QVERIFY(m.captured(3).toLongLong() >= 20);
    QCOMPARE(o.err.count("shardlab: restart "), 1);
    // The relaunched workers resumed from the step named (rank 0 says so), and finished.
    QVERIFY2(o.out.contains(QString("resume: step %1 of %2").arg(m.captured(3), m.captured(1))),
             qPrintable(o.out));
    QVERIFY2(o.out.contains(QString("summary: completed %1 steps").arg(kKillSteps)),
             qPrintable(o.out));

    QFile a(ref_model), b(model);
    QVERIFY(a.open(QIODevice::ReadOnly));
    QVERIFY(b.open(QIODevice::ReadOnly));
    const QByteArray ab = a.readAll(), bb = b.readAll();
    QVERIFY(ab.size() > 100000);
    QVERIFY2(ab == bb, "the restarted run's parameters differ from the uninterrupted run's");
  }

  // Every attempt fails alike (a launcher that runs mpirun, then exits 3): the second attempt is
  // started with --resume at the checkpoint the first wrote, and after --max-restarts 1 the run
  // gives up with the last error. Each attempt records to its own file.
  void repeatedFailureGivesUpAfterMaxRestarts() {
    const QString mpirun = QStandardPaths::findExecutable("mpirun");
    if (mpirun.isEmpty()) QSKIP("mpirun not found (apt-get install openmpi-bin)");
    const QString log = tmp_.filePath("launcher.log");
    const QString script = tmp_.filePath("failing-mpirun.sh");
    {
      QFile f(script);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(QString("#!/bin/sh\necho \"$*\" >> '%1'\n'%2' \"$@\"\nexit 3\n")
                  .arg(log, mpirun)
                  .toUtf8());
      f.close();
      QVERIFY(f.setPermissions(f.permissions() | QFileDevice::ExeOwner));
    }
    QProcessEnvironment env = cli_env(tmp_.filePath("runs"));
    env.insert("SHARDLAB_MPIRUN", script);
    const QString ck = tmp_.filePath("ck-fails");
    const QString rec = tmp_.filePath("rec/fails.slrec");
    const Outcome o = run_cli(
        mpi_job(40, ck) + QStringList{"--quiet", "--record", rec, "--max-restarts", "1"}, env);
    QCOMPARE(o.status, QProcess::NormalExit);
    QVERIFY2(o.exit_code == 1, qPrintable(o.out + o.err));
    QCOMPARE(o.err.count("shardlab: restart "), 1);
    const QString step40 = ck + "/step-00000040";
    QVERIFY2(o.err.contains("shardlab: restart 1/1 from " + step40 +
                            " (step 40) after: mpirun exited with status 3"),
             qPrintable(o.err));
    QVERIFY2(o.err.contains("shardlab: giving up after 1 restart (--max-restarts 1)\n"
                            "shardlab: error: mpirun exited with status 3"),
             qPrintable(o.err));
    QFile f(log);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QStringList calls = QString::fromUtf8(f.readAll()).split('\n', Qt::SkipEmptyParts);
    QCOMPARE(calls.size(), 2);
    QVERIFY2(!calls[0].contains("--resume"), qPrintable(calls[0]));
    QVERIFY2(calls[1].contains("--resume " + step40), qPrintable(calls[1]));
    QVERIFY(QFile::exists(rec));
    QVERIFY(QFile::exists(tmp_.filePath("rec/fails.restart-1.slrec")));
  }

  // The threads backend: a checkpoint directory that cannot be created fails every attempt at the
  // first save (IoError, worth a restart); there is no checkpoint, so the restart starts over.
  void threadsRestartFromTheBeginning() {
    const QString file = tmp_.filePath("a-file");
    {
      QFile f(file);
      QVERIFY(f.open(QIODevice::WriteOnly));
    }
    const Outcome o =
        run_cli({"run", kMlpJob, "--set", "parallel.world_size=2", "--set", "train.steps=4",
                 "--set", "train.eval_every=0", "--set", "train.eval_batches=1", "--set",
                 "train.checkpoint_dir=" + file + "/ck", "--set", "train.checkpoint_every=2",
                 "--no-record", "--quiet", "--max-restarts", "1"});
    QCOMPARE(o.status, QProcess::NormalExit);
    QVERIFY2(o.exit_code == 1, qPrintable(o.out + o.err));
    QVERIFY2(o.err.contains("shardlab: restart 1/1 from the beginning (no checkpoint of this run "
                            "yet) after: " +
                            file + "/ck"),
             qPrintable(o.err));
    QCOMPARE(o.err.count("shardlab: restart "), 1);
    QVERIFY2(o.err.contains("giving up after 1 restart"), qPrintable(o.err));
    const QString last = o.err.trimmed().section('\n', -1);
    QVERIFY2(last.startsWith("shardlab: error: " + file + "/ck"), qPrintable(o.err));
  }

  // Errors that would recur identically are not restarted: data that cannot be read (checked by
  // `run` itself before starting mpi workers) fails once.
  void badInputIsNotRestarted() {
    if (!have_mpirun()) QSKIP("mpirun not found (apt-get install openmpi-bin)");
    const Outcome o = run_cli(mpi_job(40, tmp_.filePath("ck-bad")) +
                              QStringList{"--set", "data.path=/nonexistent/fmnist", "--no-record",
                                          "--max-restarts", "3"});
    QVERIFY2(o.exit_code == 1, qPrintable(o.out + o.err));
    QVERIFY2(!o.err.contains("restart"), qPrintable(o.err));
    QVERIFY2(o.err.startsWith("shardlab: error: ") && o.err.contains("/nonexistent/fmnist"),
             qPrintable(o.err));
    QCOMPARE(o.err.count('\n'), 1);
  }

  void badFlagsGiveOneClearLine_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("message");
    const QStringList job{"run", kMlpJob, "--set", "parallel.world_size=2"};
    const QStringList ck{"--set", "train.checkpoint_dir=/tmp/unused-ck"};
    QTest::newRow("no checkpoint_dir")
        << job + QStringList{"--max-restarts", "2"}
        << "--max-restarts: a restart resumes from the job's checkpoints, but "
           "train.checkpoint_dir is not set";
    QTest::newRow("negative") << job + ck + QStringList{"--max-restarts", "-1"}
                              << "option '--max-restarts' must be in [0, 1000], got -1";
    QTest::newRow("not a number") << job + ck + QStringList{"--max-restarts=two"}
                                  << "option '--max-restarts' needs an integer, got 'two'";
    QTest::newRow("no value") << job + QStringList{"--max-restarts"}
                              << "option '--max-restarts' needs a value";
    QTest::newRow("save-model with strategy none")
        << QStringList{"run",          kMlpJob,
                       "--set",        "parallel.strategy=none",
                       "--set",        "parallel.world_size=1",
                       "--save-model", "/tmp/unused.slmodel"}
        << "--save-model: only a sharded job writes a model file";
  }

  void badFlagsGiveOneClearLine() {
    QFETCH(QStringList, args);
    QFETCH(QString, message);
    const Outcome o = run_cli(args);
    QCOMPARE(o.status, QProcess::NormalExit);
    QCOMPARE(o.exit_code, 2);
    QVERIFY2(o.err.startsWith("shardlab: " + message), qPrintable(o.err));
    QVERIFY2(o.out.isEmpty(), qPrintable(o.out));  // nothing trained
  }

  void cleanupTestCase() { QVERIFY2(nothing_left(10000), "processes were left behind"); }
};

QTEST_GUILESS_MAIN(TestRestart)
#include "tst_restart.moc"
