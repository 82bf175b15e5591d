// A rank that dies must not leave the others silent: `shardlab worker` on 3 ranks, started by the
// same mpirun command line as `shardlab run` (launch::mpirun_argv), with a 5 s communication
// timeout. Once training is under way, rank 1 gets SIGKILL. mpirun must then exit non-zero within
// the timeout plus a margin, each survivor must have said on stderr which collective it was in and
// that rank 1 did not answer, and no worker process may remain.
#include <signal.h>

#include <QtTest>

#include "engine/launch/mpirun.h"

namespace {

constexpr int kRanks = 3;
constexpr int kKilled = 1;
constexpr int kTimeoutS = 5;
// mpirun signals the survivors odls_base_sigkill_timeout (3 s, see mpirun.h) after the death; their
// probe takes up to 1.5 s. Generous for a loaded machine, short of anything that hangs.
constexpr int kMarginS = 10;

// argv of /proc/PID (empty when it is gone or unreadable).
QList<QByteArray> proc_argv(const QString& pid) {
  QFile f("/proc/" + pid + "/cmdline");
  if (!f.open(QIODevice::ReadOnly)) return {};
  return f.readAll().split('\0');
}

QByteArray proc_env(const QString& pid, const QByteArray& name) {
  QFile f("/proc/" + pid + "/environ");
  if (!f.open(QIODevice::ReadOnly)) return {};
  for (const QByteArray& kv : f.readAll().split('\0'))
    if (kv.startsWith(name + "=")) return kv.mid(name.size() + 1);
  return {};
}

qint64 proc_ppid(const QString& pid) {
  QFile f("/proc/" + pid + "/stat");
  if (!f.open(QIODevice::ReadOnly)) return -1;
  const QByteArray stat = f.readAll();
  // "pid (comm) state ppid ...": comm may hold spaces, so start after its ')'.
  const QList<QByteArray> rest = stat.mid(stat.lastIndexOf(')') + 2).split(' ');
  return rest.size() > 1 ? rest[1].toLongLong() : -1;
}

// Running `shardlab worker` processes of this build (not other builds' or other users' runs).
QStringList worker_pids() {
  QStringList pids;
  for (const QString& entry : QDir("/proc").entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
    bool numeric = false;
    entry.toLongLong(&numeric);
    if (!numeric) continue;
    const QList<QByteArray> argv = proc_argv(entry);
    if (argv.size() > 1 && argv[0] == SHARDLAB_CLI && argv[1] == "worker") pids << entry;
  }
  return pids;
}

// Waits up to `ms` for every worker to be gone; kills (by pid) what is left, so that a failure
// here cannot disturb the tests that run next.
bool no_workers_left(int ms) {
  QElapsedTimer t;
  t.start();
  while (!worker_pids().isEmpty() && t.elapsed() < ms) QThread::msleep(50);
  const QStringList left = worker_pids();
  for (const QString& pid : left) ::kill(static_cast<pid_t>(pid.toLongLong()), SIGKILL);
  return left.isEmpty();
}

}  // namespace

class TstRankKilled : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY2(no_workers_left(0), "shardlab workers of this build were running");
  }

  void survivorsNameTheDeadRankAndTheCollective() {
    const std::vector<std::string> argv = shardlab::launch::mpirun_argv(
        kRanks, {SHARDLAB_CLI, "worker", SHARDLAB_SOURCE_DIR "/resources/jobs/fashion_mlp.json",
                 "--set", "train.steps=1000000", "--set", "train.batch_size=48", "--set",
                 "parallel.world_size=3", "--set", "parallel.strategy=zero2", "--set",
                 "parallel.timeout_s=" + std::to_string(kTimeoutS)});
    QStringList args;
    for (size_t i = 1; i < argv.size(); ++i) args << QString::fromStdString(argv[i]);
    QProcess mpirun;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("OMPI_ALLOW_RUN_AS_ROOT", "1");
    env.insert("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    env.insert("OPENBLAS_NUM_THREADS", "1");
    mpirun.setProcessEnvironment(env);
    mpirun.start(QString::fromStdString(argv[0]), args);
    QVERIFY2(mpirun.waitForStarted(10000), "mpirun did not start");

    // Training under way: rank 0 has printed a step line.
    QByteArray out;
    QElapsedTimer t;
    t.start();
    while (!out.contains("step ") && t.elapsed() < 20000 && mpirun.state() == QProcess::Running) {
      mpirun.waitForReadyRead(200);
      out += mpirun.readAllStandardOutput();
    }
    if (!out.contains("step ")) {
      mpirun.kill();
      mpirun.waitForFinished(5000);
      no_workers_left(5000);
      QFAIL(qPrintable("no training step within 20 s:\n" + out + mpirun.readAllStandardError()));
    }

    // Rank 1: a worker that mpirun started (its child) with OMPI_COMM_WORLD_RANK=1.
    QString victim;
    for (const QString& pid : worker_pids())
      if (proc_ppid(pid) == mpirun.processId() &&
          proc_env(pid, "OMPI_COMM_WORLD_RANK") == QByteArray::number(kKilled))
        victim = pid;
    if (victim.isEmpty()) {
      mpirun.kill();
      mpirun.waitForFinished(5000);
      no_workers_left(5000);
      QFAIL("rank 1's worker process not found among mpirun's children");
    }
    QElapsedTimer since_kill;
    since_kill.start();
    QCOMPARE(::kill(static_cast<pid_t>(victim.toLongLong()), SIGKILL), 0);

    const bool finished = mpirun.waitForFinished((kTimeoutS + kMarginS) * 1000);
    const qint64 ms = since_kill.elapsed();
    if (!finished) {
      mpirun.kill();
      mpirun.waitForFinished(5000);
    }
    const QString err = QString::fromLocal8Bit(mpirun.readAllStandardError());
    const bool clean = no_workers_left(5000);
    qInfo("mpirun ended %lld ms after the kill, exit code %d", ms, mpirun.exitCode());
    QVERIFY2(finished, qPrintable("mpirun still running after the timeout + margin:\n" + err));
    QVERIFY2(mpirun.exitStatus() == QProcess::NormalExit && mpirun.exitCode() != 0,
             qPrintable(err));
    QVERIFY2(clean, "shardlab worker processes were left behind");
    for (int r = 0; r < kRanks; ++r) {
      if (r == kKilled) continue;
      // Stopped by mpirun (its SIGTERM comes first with this timeout), e.g. "shardlab: error:
      // rank 0 of 3 stopped by mpirun (SIGTERM) while in reduce_scatter on group world (seq 432):
      // world rank 1 did not answer a liveness probe within 1.5 s (...)", or timed out first:
      // "shardlab: error: all_gather on group world (seq 433) timed out after 5000 ms on rank 0 of
      // 3: world rank 1 did not answer a liveness probe within 5 s (...)".
      const QString coll =
          "(all_reduce|reduce_scatter|all_gather|broadcast|barrier) on group \\S+ "
          "\\(seq \\d+\\)";
      const QString dead =
          QString("[^\\n]*: world rank %1 did not answer a liveness probe").arg(kKilled);
      const QRegularExpression line(
          QString("shardlab: error: (rank %1 of %2 [^\\n]*while in %3|%3 timed out after \\d+ ms "
                  "on rank %1 of %2)%4")
              .arg(r)
              .arg(kRanks)
              .arg(coll, dead));
      QVERIFY2(line.match(err).hasMatch(),
               qPrintable(QString("no error from rank %1 naming rank %2 and its collective:\n%3")
                              .arg(r)
                              .arg(kKilled)
                              .arg(err)));
    }
  }

  void cleanupTestCase() { no_workers_left(5000); }
};

QTEST_GUILESS_MAIN(TstRankKilled)
#include "tst_rank_killed.moc"
