// Slow and lossy links during a run, on a test cluster of network namespaces (netns_cluster.h;
// this kernel has no netem, so: `tc tbf` for a rate limit, iptables' statistic match for loss).
//   slowLinkIsNotAStraggler  zero2 on hosts 1-2 streaming to a monitor on host 0; after the
//                            transfer baseline (TransferWatch::kBaselineSeconds) host 2's link is
//                            limited to 100 Mbit/s both ways: the monitor must say the world
//                            group's transfers are slow, and from the moment the link is slowed
//                            never name a rank of host 1 (a healthy host) a straggler.
//   lossyLinkCompletes       5% of host 2's packets dropped both ways: a short run completes and
//                            --verify passes.
// Skips, saying why, without root or without tc / iptables.
#include <QtTest>

#include <QElapsedTimer>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryDir>

#include "tests/cluster/netns_cluster.h"
#include "tests/common/monitor_process.h"

using shardlab::test::MonitorProcess;
using shardlab::test::NetnsCluster;
using shardlab::test::ProcessOutcome;
using shardlab::test::run_process;

namespace {

const QString kMlp = QStringLiteral(SHARDLAB_SOURCE_DIR "/resources/jobs/fashion_mlp.json");

// `args` in namespace `ns` (as root, outside the test's programs).
ProcessOutcome in_ns(const QString& ns, const QStringList& args) {
  return run_process("ip", QStringList{"netns", "exec", ns} + args, {});
}

}  // namespace

class TestClusterLinks : public QObject {
  Q_OBJECT

 private slots:
  void slowLinkIsNotAStraggler() {
    if (!NetnsCluster::have_tool("tc")) QSKIP("tc is not installed (iproute2)");
    NetnsCluster c(3);
    SHARDLAB_REQUIRE_CLUSTER(c);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    MonitorProcess monitor(dir.path());
    QVERIFY2(monitor.start(0.5, 60, c.mpi_env(), c.wrap(0), c.address(0)),
             qPrintable(monitor.output()));
    QProcess run;
    run.setProcessEnvironment(c.mpi_env());
    c.start(run, 0, SHARDLAB_CLI,
            {"run", kMlp, "--hosts", "h1:2,h2:2", "--quiet", "--set", "parallel.backend=mpi",
             "--set", "train.steps=1000000", "--set", "train.eval_every=0", "--telemetry",
             monitor.address(), "--token-file", monitor.token()});
    QVERIFY(run.waitForStarted(10000));
    // The baseline: the first 10 s of the run's collectives, and 2 s more.
    QElapsedTimer t;
    t.start();
    while (t.elapsed() < 12000 && run.state() != QProcess::NotRunning) {
      run.waitForFinished(100);
      monitor.poll(0);
    }
    QVERIFY2(run.state() == QProcess::Running,
             qPrintable(QString::fromUtf8(run.readAllStandardError()).right(3000)));
    const qsizetype before = monitor.tables().size();
    const QStringList before_tables = monitor.tables();
    for (const QString& table : before_tables)
      QVERIFY2(!table.contains("transfers at"), qPrintable(table));
    // 100 Mbit/s both ways on host 2's link: at its bridge port and at its own interface.
    const QString tbf = "tc qdisc add dev %1 root tbf rate 100mbit burst 64kb latency 100ms";
    const ProcessOutcome a = in_ns(c.name() + "-br", tbf.arg(c.name() + "-v2").split(' '));
    const ProcessOutcome b = in_ns(c.name() + "-h2", tbf.arg("eth0").split(' '));
    if (a.exit_code != 0 || b.exit_code != 0)
      QSKIP(qPrintable("tc tbf is refused here: " + a.err + b.err));
    // The tables printed while tc was being applied, and the highest step they show: a naming
    // that began at or before it began on the healthy link (below).
    monitor.poll(0);
    qint64 slowed_by_step = 0;
    static const QRegularExpression row_step(
        "^\\s*\\d+\\s+pp\\d+ tp\\d+ dp\\d+\\s+\\S+\\s+(\\d+)\\s");
    for (const QString& table : monitor.tables())
      for (const QString& row : table.split('\n')) {
        const auto m = row_step.match(row);
        if (m.hasMatch()) slowed_by_step = std::max(slowed_by_step, m.captured(1).toLongLong());
      }
    QVERIFY2(slowed_by_step > 0, qPrintable(monitor.output().right(2000)));
    static const QRegularExpression slow(
        "world transfers at (\\S+) (MB|GB)/s against (\\S+) GB/s in the first 10 s — a link is "
        "slow; run shardlab doctor --hosts to find it");
    // The line comes once the recent window holds slow transfers, and its figure falls to the
    // limit as the window leaves the last fast ones behind: 100 Mbit/s is 0.0125 GB/s each way,
    // which bounds the ring's bus bandwidth.
    QString first, settled;
    t.restart();
    while (settled.isEmpty() && t.elapsed() < 25000 && run.state() != QProcess::NotRunning) {
      run.waitForFinished(100);
      monitor.poll(0);
      const QStringList tables = monitor.tables();
      for (qsizetype i = before; i < tables.size() && settled.isEmpty(); ++i) {
        const auto m = slow.match(tables[i]);
        if (!m.hasMatch()) continue;
        if (first.isEmpty()) first = m.captured(0);
        const double gbps = m.captured(1).toDouble() / (m.captured(2) == "MB" ? 1000 : 1);
        if (gbps < 0.05) settled = m.captured(0);
      }
    }
    QVERIFY2(!first.isEmpty(), qPrintable(monitor.output().right(4000)));
    QVERIFY2(!settled.isEmpty(), qPrintable(first + "\n" + monitor.output().right(4000)));
    qInfo("first: %s", qPrintable(first));
    qInfo("then: %s", qPrintable(settled));
    // From the moment the link is slowed no rank on a healthy host is named a straggler: in the
    // first second, before the slow-transfer line can be said, the ranks behind the link arrive
    // last because their data does (TransferWatch::slow_lately keeps them from being named; a CI
    // run without it named rank 1 on h1 at step 2835, as the link was slowed). One on host 2 may
    // be named before its slow collectives are seen. Once the line is there nobody is. The healthy
    // first seconds are counted, not judged: these hosts share this machine's two cores with four
    // ranks that spin while they wait, so the scheduler alone holds one back (rank 3 on h2 was
    // named in 17 of 24 healthy tables of one run, its peers waiting 6-17% of their step for it,
    // a real share of their time lost to it); tst_straggler's noSlowdownNamesNobody judges
    // healthy runs on one host. So a rank named on the healthy link may still be named in the
    // first tables after it (a CI run: rank 1 on h1 "named since step 1977", before the link was
    // slowed, in a table at step 2231 without the slow-transfer line yet): a naming is judged when
    // it began after the highest step of the tables printed before tc was applied.
    const QStringList tables = monitor.tables();
    const auto naming = [](const QString& t) { return t.contains("STRAGGLER"); };
    qInfo("tables naming a straggler: %lld of %lld before the link was slowed, %lld of %lld after",
          static_cast<long long>(std::count_if(tables.begin(), tables.begin() + before, naming)),
          static_cast<long long>(before),
          static_cast<long long>(std::count_if(tables.begin() + before, tables.end(), naming)),
          static_cast<long long>(tables.size() - before));
    static const QRegularExpression named_since("named since step (\\d+)");
    for (const QString& table : tables.mid(before)) {
      const auto since = named_since.match(table);
      const bool carried = since.hasMatch() && since.captured(1).toLongLong() <= slowed_by_step;
      for (const QString& row : table.split('\n'))
        if (row.contains("STRAGGLER") && !carried)
          QVERIFY2(row.contains(" h2 "), qPrintable(table));
      for (const QString& line : table.split('\n'))
        if (line.contains(" is slow: ") && !carried)
          QVERIFY2(line.contains(" on h2 is slow"), qPrintable(table));
      if (table.contains(slow))
        QVERIFY2(!table.contains("STRAGGLER") && !table.contains(" is slow: "), qPrintable(table));
    }
    run.terminate();  // `shardlab run` passes SIGTERM on to mpirun, which ends the ranks
    QVERIFY(run.waitForFinished(30000));
  }

  void lossyLinkCompletes() {
    if (!NetnsCluster::have_tool("iptables")) QSKIP("iptables is not installed");
    NetnsCluster c(3);
    SHARDLAB_REQUIRE_CLUSTER(c);
    for (const char* chain : {"INPUT", "OUTPUT"}) {
      const ProcessOutcome o =
          in_ns(c.name() + "-h2", {"iptables", "-A", chain, "-m", "statistic", "--mode", "random",
                                   "--probability", "0.05", "-j", "DROP"});
      if (o.exit_code != 0) QSKIP(qPrintable("iptables' statistic match is refused: " + o.err));
    }
    const ProcessOutcome o =
        c.run(0, SHARDLAB_CLI,
              {"run", kMlp, "--hosts", "h1:2,h2:2", "--quiet", "--no-record", "--verify", "--set",
               "parallel.backend=mpi", "--set", "train.steps=20", "--set", "train.eval_every=0"},
              90000);
    QVERIFY2(o.exit_code == 0, qPrintable(o.out.right(2000) + o.err.right(2000)));
    QVERIFY2(o.out.contains(QRegularExpression("verify: max_rel_diff=\\S+ tolerance=.* OK")),
             qPrintable(o.out.right(2000)));
    // Packets were dropped (the rule's counter), so the run did cross a lossy link.
    const ProcessOutcome counters = in_ns(c.name() + "-h2", {"iptables", "-L", "-v", "-n", "-x"});
    static const QRegularExpression dropped("\\n\\s*(\\d+)\\s+\\d+\\s+DROP");
    const auto d = dropped.match(counters.out);
    QVERIFY2(d.hasMatch() && d.captured(1).toLongLong() > 0, qPrintable(counters.out));
  }
};

QTEST_GUILESS_MAIN(TestClusterLinks)
#include "tst_cluster_links.moc"
