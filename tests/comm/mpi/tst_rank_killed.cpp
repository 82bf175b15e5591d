// A rank that dies must not leave the others silent: `shardlab worker` on 3 ranks, started by the
// same mpirun command line as `shardlab run` (launch::mpirun_argv), with a 5 s communication
// timeout. Once training is under way, rank 1 gets SIGKILL. mpirun must then exit non-zero within
// the timeout plus a margin, each survivor must have said on stderr which collective it was in
// (and at least one, that rank 1 alone did not answer), and no worker process of this test may
// remain. Only processes descending from this test's mpirun are looked at: under ctest -j other
// tests run workers of the same build.
#include <signal.h>

#include <cerrno>
#include <cstring>

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

// The fields of /proc/PID/stat after "pid (comm)": [0] state, [1] ppid, ... [19] starttime (empty
// when the process is gone). comm may hold spaces, so split after its last ')'.
QList<QByteArray> proc_stat(qint64 pid) {
  QFile f(QString("/proc/%1/stat").arg(pid));
  if (!f.open(QIODevice::ReadOnly)) return {};
  const QByteArray stat = f.readAll();
  const qsizetype close = stat.lastIndexOf(')');
  if (close < 0) return {};
  return stat.mid(close + 2).trimmed().split(' ');
}

qint64 proc_ppid(qint64 pid) {
  const QList<QByteArray> st = proc_stat(pid);
  return st.size() > 1 ? st[1].toLongLong() : -1;
}

// Whether `pid` is `root` or one of its descendants (its parent chain reaches `root`).
bool descends_from(qint64 pid, qint64 root) {
  for (int depth = 0; depth < 64 && pid > 1; ++depth) {
    if (pid == root) return true;
    pid = proc_ppid(pid);
  }
  return false;
}

// The `shardlab worker` processes of this build that descend from `root` (this test's mpirun),
// each with its start time (so that a pid reused later is not mistaken for it). Other tests'
// workers (ctest -j) are not this test's business: it never looks at, waits for or kills them.
QMap<qint64, QByteArray> workers_of(qint64 root) {
  QMap<qint64, QByteArray> found;
  if (root <= 0) return found;
  for (const QString& entry : QDir("/proc").entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
    bool numeric = false;
    const qint64 pid = entry.toLongLong(&numeric);
    if (!numeric) continue;
    const QList<QByteArray> argv = proc_argv(entry);
    if (argv.size() < 2 || argv[0] != SHARDLAB_CLI || argv[1] != "worker") continue;
    if (!descends_from(pid, root)) continue;
    const QList<QByteArray> st = proc_stat(pid);
    if (st.size() > 19) found.insert(pid, st[19]);
  }
  return found;
}

// Whether the process `pid` that started at `start` still runs (a zombie has ended).
bool still_running(qint64 pid, const QByteArray& start) {
  const QList<QByteArray> st = proc_stat(pid);
  return st.size() > 19 && st[19] == start && st[0] != "Z" && st[0] != "X";
}

}  // namespace

class TstRankKilled : public QObject {
  Q_OBJECT

  // This test's workers: every one seen descending from its mpirun (pid -> start time). They are
  // remembered because once mpirun has ended, what it leaves behind is no longer its descendant.
  QMap<qint64, QByteArray> workers_;
  qint64 mpirun_pid_ = 0;

  void track() {
    const QMap<qint64, QByteArray> now = workers_of(mpirun_pid_);
    for (auto it = now.begin(); it != now.end(); ++it) workers_.insert(it.key(), it.value());
  }

  // Waits up to `ms` for every worker of this test to be gone; kills (by pid) what is left, so
  // that a failure here cannot disturb the tests that run next.
  bool no_workers_left(int ms) {
    const auto left = [this] {
      track();
      QList<qint64> pids;
      for (auto it = workers_.begin(); it != workers_.end(); ++it)
        if (still_running(it.key(), it.value())) pids << it.key();
      return pids;
    };
    QElapsedTimer t;
    t.start();
    while (!left().isEmpty() && t.elapsed() < ms) QThread::msleep(50);
    const QList<qint64> pids = left();
    for (qint64 pid : pids) ::kill(static_cast<pid_t>(pid), SIGKILL);
    return pids.isEmpty();
  }

 private Q_SLOTS:
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
    mpirun_pid_ = mpirun.processId();

    // Training under way: rank 0 has printed a step line.
    QByteArray out;
    QElapsedTimer t;
    t.start();
    while (!out.contains("step ") && t.elapsed() < 20000 && mpirun.state() == QProcess::Running) {
      mpirun.waitForReadyRead(200);
      out += mpirun.readAllStandardOutput();
      track();
    }
    if (!out.contains("step ")) {
      mpirun.kill();
      mpirun.waitForFinished(5000);
      no_workers_left(5000);
      QFAIL(qPrintable("no training step within 20 s:\n" + out + mpirun.readAllStandardError()));
    }

    // Rank 1: a worker of this mpirun with OMPI_COMM_WORLD_RANK=1.
    track();
    QString victim;
    for (auto it = workers_.begin(); it != workers_.end(); ++it)
      if (still_running(it.key(), it.value()) &&
          proc_env(QString::number(it.key()), "OMPI_COMM_WORLD_RANK") ==
              QByteArray::number(kKilled))
        victim = QString::number(it.key());
    if (victim.isEmpty()) {
      mpirun.kill();
      mpirun.waitForFinished(5000);
      no_workers_left(5000);
      QFAIL("rank 1's worker process not found among mpirun's descendants");
    }
    QElapsedTimer since_kill;
    since_kill.start();
    if (::kill(static_cast<pid_t>(victim.toLongLong()), SIGKILL) != 0) {
      const int e = errno;
      mpirun.kill();
      mpirun.waitForFinished(5000);
      no_workers_left(5000);
      QFAIL(qPrintable(QString("could not SIGKILL rank 1 (pid %1): %2")
                           .arg(victim, e == ESRCH ? "it had already exited" : strerror(e))));
    }

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
    // Each survivor's line: stopped by mpirun (its SIGTERM comes first with this timeout), e.g.
    // "shardlab: error: rank 0 of 3 stopped by mpirun (SIGTERM) while in reduce_scatter on group
    // world (seq 432): world rank 1 did not answer a liveness probe within 1.5 s (...)", or timed
    // out first: "shardlab: error: all_gather on group world (seq 433) timed out after 5000 ms on
    // rank 0 of 3: world rank 1 did not answer a liveness probe within 5 s (...)".
    //
    // The probe only sees a survivor that probes at the same time (within 1.5 s): under load one
    // may be scheduled too late for the other, which then names it as well ("world ranks 1 and 2
    // did not answer ..."), or the probe cannot run at all. So every survivor must say which
    // collective it was in, at least one must name exactly the dead rank, and none may name a
    // set of silent ranks without it.
    const QString coll =
        "(all_reduce|reduce_scatter|all_gather|broadcast|barrier) on group \\S+ \\(seq \\d+\\)";
    const QRegularExpression silent(
        "world ranks? ([0-9]+(?:(?:, | and )[0-9]+)*) did not answer a liveness probe");
    int exact = 0;
    for (int r = 0; r < kRanks; ++r) {
      if (r == kKilled) continue;
      const QRegularExpression line(
          QString("shardlab: error: (rank %1 of %2 [^\\n]*while in %3|%3 timed out after \\d+ ms "
                  "on rank %1 of %2)[^\\n]*")
              .arg(r)
              .arg(kRanks)
              .arg(coll));
      const QRegularExpressionMatch m = line.match(err);
      QVERIFY2(
          m.hasMatch(),
          qPrintable(
              QString("no error line from rank %1 naming its collective:\n%2").arg(r).arg(err)));
      const QString said = m.captured(0);
      const QRegularExpressionMatch s = silent.match(said);
      if (s.hasMatch()) {
        const QStringList ranks =
            s.captured(1).split(QRegularExpression("(, | and )"), Qt::SkipEmptyParts);
        QVERIFY2(ranks.contains(QString::number(kKilled)),
                 qPrintable(QString("rank %1 names silent ranks but not rank %2:\n%3")
                                .arg(r)
                                .arg(kKilled)
                                .arg(said)));
        if (ranks == QStringList{QString::number(kKilled)}) ++exact;
      }
      if (!said.contains(QString("world rank %1 did not answer").arg(kKilled)))
        qInfo("rank %d could not single out rank %d: %s", r, kKilled, qPrintable(said));
    }
    QVERIFY2(exact >= 1,
             qPrintable(QString("no survivor named exactly world rank %1 as silent:\n%2")
                            .arg(kKilled)
                            .arg(err)));
  }

  void cleanupTestCase() { no_workers_left(5000); }
};

QTEST_GUILESS_MAIN(TstRankKilled)
#include "tst_rank_killed.moc"
