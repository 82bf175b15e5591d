// A rank that fails must not hang its peers: mpirun on mpi_rank_fails (rank 1 throws before an
// all-reduce that the others enter with a 60 s timeout) must exit non-zero well before that
// timeout, name the failing rank, and leave no process behind.
#include <QtTest>

#include <csignal>

#include "tests/common/process.h"

using namespace shardlab;

namespace {

// The pids of running mpi_rank_fails processes (argv[0] is the helper; mpirun's is not).
QList<qint64> helper_pids() {
  QList<qint64> pids;
  const QByteArray helper = SHARDLAB_MPI_RANK_FAILS;
  for (const QString& entry : QDir("/proc").entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
    bool numeric = false;
    const qint64 pid = entry.toLongLong(&numeric);
    if (!numeric) continue;
    QFile cmdline("/proc/" + entry + "/cmdline");
    if (!cmdline.open(QIODevice::ReadOnly)) continue;
    const QByteArray argv0 = cmdline.readAll().split('\0').value(0);
    if (argv0 == helper) pids.push_back(pid);
  }
  return pids;
}

// Waits up to `ms` for every helper process to be gone; kills (by pid) what is left.
bool no_helpers_left(int ms) {
  QElapsedTimer t;
  t.start();
  while (!helper_pids().isEmpty() && t.elapsed() < ms) QThread::msleep(50);
  const QList<qint64> left = helper_pids();
  for (qint64 pid : left) ::kill(static_cast<pid_t>(pid), SIGKILL);
  return left.isEmpty();
}

test::ProcessOutcome launch(int np, const QString& fail_rank) {
  test::ProcessOptions o;
  o.start_timeout_ms = 10000;
  o.timeout_ms = 90000;
  return test::run_process(
      SHARDLAB_MPIEXEC,
      {"-n", QString::number(np), "--oversubscribe", SHARDLAB_MPI_RANK_FAILS, fail_rank}, o);
}

}  // namespace

class TstCommMpiFailure : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() { QVERIFY2(helper_pids().isEmpty(), "mpi_rank_fails already running"); }

  // The control: with no failing rank the same job succeeds, so the test below can tell.
  void jobSucceedsWithoutFailure() {
    const auto o = launch(3, "none");
    QVERIFY2(o.finished, "mpirun did not finish");
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    for (int r = 0; r < 3; ++r)
      QVERIFY2(o.out.contains(QString("rank %1: all_reduce ok (3)").arg(r)), qPrintable(o.out));
    QVERIFY(no_helpers_left(5000));
  }

  void failingRankDoesNotHangPeers() {
    const auto o = launch(3, "1");
    QVERIFY2(o.finished, "mpirun still running after 90 s: the peers hung");
    QVERIFY2(o.exit_code != 0, qPrintable(o.out + o.err));
    // Well under the peers' 60 s timeout: mpirun tore the job down.
    QVERIFY2(o.ms < 20000, qPrintable(QString("took %1 ms").arg(o.ms)));
    QVERIFY2(o.err.contains("mpi_rank_fails: rank 1: boom"), qPrintable(o.err));
    QVERIFY2(!o.out.contains("all_reduce ok"), qPrintable(o.out));
    QVERIFY2(no_helpers_left(5000), "mpi_rank_fails processes left behind");
  }
};

QTEST_GUILESS_MAIN(TstCommMpiFailure)
#include "tst_comm_mpi_failure.moc"
