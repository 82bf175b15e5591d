// Runs across hosts as a user starts them, on a test cluster of network namespaces
// (netns_cluster.h): `shardlab run --hosts` from host 0 with the ranks on hosts 1-3, two each,
// for ddp, zero2 and a pp 2 x dp 3 hybrid, each checked against one process (--verify) and each
// host's link counted (the ranks' traffic must cross it: shared memory between hosts would be a
// bug); a `shardlab monitor` listening on host 0's address sees the hosts in its table and its
// recording, and refuses a worker holding another token. Skips, saying why, without root.
#include <QtTest>

#include <QRegularExpression>
#include <QTemporaryDir>

#include "tests/cluster/netns_cluster.h"
#include "tests/common/monitor_process.h"

using shardlab::test::MonitorProcess;
using shardlab::test::NetnsCluster;
using shardlab::test::ProcessOutcome;

namespace {

const QString kMlp = QStringLiteral(SHARDLAB_SOURCE_DIR "/resources/jobs/fashion_mlp.json");
const QString kGpt = QStringLiteral(SHARDLAB_SOURCE_DIR "/resources/jobs/gpt-3d.json");

QString both(const ProcessOutcome& o) {
  return o.out.right(3000) + "\n--- stderr ---\n" + o.err.right(3000);
}

}  // namespace

class TestClusterRun : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    cluster_ = std::make_unique<NetnsCluster>(4);
    SHARDLAB_REQUIRE_CLUSTER(*cluster_);
  }
  void cleanupTestCase() { cluster_.reset(); }

  void runsAcrossHosts_data() {
    QTest::addColumn<QString>("job");
    QTest::addColumn<QStringList>("sets");
    QTest::newRow("ddp") << kMlp
                         << QStringList{"parallel.strategy=ddp", "train.steps=20",
                                        "train.batch_size=60"};
    QTest::newRow("zero2") << kMlp
                           << QStringList{"parallel.strategy=zero2", "train.steps=20",
                                          "train.batch_size=60"};
    QTest::newRow("hybrid pp2 tp1 dp3")
        << kGpt << QStringList{"parallel.pp=2",  "parallel.tp=1",       "parallel.dp=3",
                               "train.steps=10", "train.batch_size=12", "parallel.micro_batches=2"};
  }
  void runsAcrossHosts() {
    QFETCH(QString, job);
    QFETCH(QStringList, sets);
    NetnsCluster& c = *cluster_;
    std::array<qulonglong, 4> before{};
    for (int h = 1; h <= 3; ++h) before[h] = c.link_bytes(h);
    QStringList args{"run",
                     job,
                     "--hosts",
                     "h1:2,h2:2,h3:2",
                     "--verify",
                     "--quiet",
                     "--no-record",
                     "--set",
                     "parallel.backend=mpi",
                     "--set",
                     "parallel.world_size=6",
                     "--set",
                     "train.eval_every=0"};
    for (const QString& s : sets) args << "--set" << s;
    const ProcessOutcome o = c.run(0, SHARDLAB_CLI, args, 90000);
    QVERIFY2(o.exit_code == 0, qPrintable(both(o)));
    QVERIFY2(o.out.contains(QRegularExpression("verify: max_rel_diff=\\S+ tolerance=.* OK")),
             qPrintable(both(o)));
    // Every worker host's link carried the ranks' traffic: at least the model's parameters once
    // (fashion_mlp: 235146 floats, 0.9 MB; the gpt: 0.1 M floats), which no local path would.
    for (int h = 1; h <= 3; ++h) {
      const qulonglong crossed = c.link_bytes(h) - before[h];
      QVERIFY2(crossed > 400000,
               qPrintable(QString("host h%1's link carried only %2 bytes").arg(h).arg(crossed)));
    }
    QVERIFY2(c.pids().isEmpty(), qPrintable("left running: " + c.pids().join(' ')));
  }

  // The monitor on host 0's address: the table and the recording name each rank's host; a worker
  // with another token is refused.
  void monitorAcrossHosts() {
    NetnsCluster& c = *cluster_;
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    MonitorProcess monitor(dir.path());
    QVERIFY2(monitor.start(0.5, 60, c.mpi_env(), c.wrap(0), c.address(0)),
             qPrintable(monitor.output()));
    // A worker holding another token is refused, and says so.
    const QString wrong = dir.path() + "/wrong.token";
    {
      QFile f(wrong);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n");
      f.close();
      f.setPermissions(QFile::ReadOwner | QFile::WriteOwner);
    }
    const ProcessOutcome refused =
        c.run(1, SHARDLAB_CLI,
              {"run", kMlp, "--set", "parallel.world_size=2", "--set", "train.steps=3", "--quiet",
               "--no-record", "--telemetry", monitor.address(), "--token-file", wrong},
              60000);
    // Training does not depend on its telemetry: the run ends, and says nothing was delivered.
    QVERIFY2(refused.exit_code == 0, qPrintable(both(refused)));
    QVERIFY2(refused.out.contains("telemetry: 0 events streamed"), qPrintable(both(refused)));
    const ProcessOutcome o =
        c.run(0, SHARDLAB_CLI,
              {"run", kMlp, "--hosts", "h1:2,h2:2", "--quiet", "--set", "parallel.backend=mpi",
               "--set", "train.steps=30", "--set", "train.eval_every=0", "--telemetry",
               monitor.address(), "--token-file", monitor.token()},
              90000);
    QVERIFY2(o.exit_code == 0, qPrintable(both(o)));
    QVERIFY2(monitor.wait_done(30000), qPrintable(monitor.output().right(3000)));
    const QString table = monitor.last_table();
    QVERIFY2(table.contains("HOST"), qPrintable(table));
    for (int r = 0; r < 4; ++r) {
      const QRegularExpression row(
          QString("(^|\\n)\\s+%1\\s+pp0 tp0 dp%1\\s+finished\\s.*\\sh%2(\\s|$)")
              .arg(r)
              .arg(1 + r / 2));
      QVERIFY2(table.contains(row),
               qPrintable(QString("rank %1 not on h%2:\n").arg(r).arg(1 + r / 2) + table));
    }
    QVERIFY2(monitor.output().contains("rank 0 left instead of answering the CHALLENGE: it did "
                                       "not accept this collector's proof of the token"),
             qPrintable(monitor.output().right(3000)));
    // The recording replays with the hosts.
    const ProcessOutcome replay =
        shardlab::test::run_process(SHARDLAB_CLI, {"replay", monitor.recording()});
    QVERIFY2(replay.exit_code == 0, qPrintable(both(replay)));
    for (int r = 0; r < 4; ++r)
      QVERIFY2(replay.out.contains(QRegularExpression(
                   QString("(^|\\n)\\s+%1\\s+pp0.*\\sh%2(\\s|$)").arg(r).arg(1 + r / 2))),
               qPrintable(replay.out));
  }

 private:
  std::unique_ptr<NetnsCluster> cluster_;
};

QTEST_GUILESS_MAIN(TestClusterRun)
#include "tst_cluster_run.moc"
