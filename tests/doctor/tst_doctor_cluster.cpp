// `shardlab doctor --cluster` as a user runs it, under a real mpirun:
//   - loopback: 3 ranks on this machine, --json parses, 3 hosts and 3 pairs with figures, the
//     shared host said in a note, the exit status 1 exactly when a finding names something;
//   - started alone (a world of 1) or with GPU options: one line and a non-zero status;
//   - on the test cluster of tests/cluster (4 network namespaces h0..h3, root only; skipped with
//     the reason elsewhere): a healthy cluster names nobody and exits 0 (under mpirun started by
//     hand); with h1's port at the bridge limited to 100 Mbit/s (tc tbf), h1 is named as the one
//     slow network, and only it (started by `shardlab doctor --hosts`); `shardlab plan
//     --calibrate --links` on h0 takes the healthy run's pairs as the links between nodes.
#include <QtTest>

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStandardPaths>
#include <QTemporaryDir>

#include <algorithm>
#include <vector>

#include "tests/cluster/netns_cluster.h"
#include "tests/common/process.h"

using shardlab::test::NetnsCluster;
using shardlab::test::ProcessOptions;
using shardlab::test::ProcessOutcome;
using shardlab::test::run_process;

namespace {

QJsonObject parse(const ProcessOutcome& r) {
  QJsonParseError e;
  const QJsonDocument doc = QJsonDocument::fromJson(r.out.toUtf8(), &e);
  if (e.error != QJsonParseError::NoError || !doc.isObject()) {
    qWarning("stdout: %s\nstderr: %s", qPrintable(r.out), qPrintable(r.err));
    return {};
  }
  return doc.object();
}

QString text(const ProcessOutcome& r) {
  return QString("exit %1\nstdout:\n%2\nstderr:\n%3").arg(r.exit_code).arg(r.out, r.err);
}

// Every host has figures, every pair a bandwidth and latency above zero.
void verify_figures(const QJsonObject& doc, int n) {
  const QJsonArray hosts = doc["hosts"].toArray();
  QCOMPARE(hosts.size(), n);
  for (int r = 0; r < n; ++r) {
    const QJsonObject h = hosts[r].toObject();
    QCOMPARE(h["rank"].toInt(), r);
    QVERIFY(!h["host"].toString().isEmpty());
    QVERIFY(h["gemm_gflops"].toDouble() > 0);
    QVERIFY(h["memory_gb_per_second"].toDouble() > 0);
    QVERIFY(h["link_gb_per_second"].toDouble() > 0);
    QVERIFY(h["latency_us"].toDouble() > 0);
  }
  const QJsonArray pairs = doc["pairs"].toArray();
  QCOMPARE(pairs.size(), n * (n - 1) / 2);
  for (const QJsonValue& p : pairs) {
    QVERIFY(p["gb_per_second"].toDouble() > 0);
    QVERIFY(p["latency_us"].toDouble() > 0);
  }
}

}  // namespace

class TestDoctorCluster : public QObject {
  Q_OBJECT

 private slots:
  void loopbackThreeRanks() {
    const QString mpirun = QStandardPaths::findExecutable("mpirun");
    if (mpirun.isEmpty()) QSKIP("mpirun not found (apt-get install openmpi-bin)");
    ProcessOptions o;
    o.env.insert("OMPI_ALLOW_RUN_AS_ROOT", "1");
    o.env.insert("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    o.timeout_ms = 60000;
    const ProcessOutcome r =
        run_process(mpirun,
                    {"-np", "3", "--oversubscribe", "--mca", "mpi_yield_when_idle", "1",
                     SHARDLAB_CLI, "doctor", "--cluster", "--json"},
                    o);
    QVERIFY2(r.finished, qPrintable(text(r)));
    const QJsonObject doc = parse(r);
    QVERIFY2(!doc.isEmpty(), qPrintable(text(r)));
    QCOMPARE(doc["command"].toString(), QString("doctor --cluster"));
    verify_figures(doc, 3);
    const QString host = doc["hosts"].toArray()[0].toObject()["host"].toString();
    const QJsonArray notes = doc["notes"].toArray();
    QVERIFY2(notes.size() == 1 &&
                 notes[0].toString().startsWith("ranks 0, 1, 2 share host " + host +
                                                ": links between them are not the network"),
             qPrintable(text(r)));
    // The machine may be busy with other work while one rank measures (a GEMM finding then is
    // right); the status must agree with the findings either way.
    const bool named = !doc["findings"].toArray().isEmpty();
    QCOMPARE(r.exit_code, named ? 1 : 0);
    // The table went to stderr, one copy (rank 0's).
    QCOMPARE(r.err.count("pair bandwidth"), 1);
  }

  void aloneIsOneLine() {
    const ProcessOutcome r = run_process(SHARDLAB_CLI, {"doctor", "--cluster"});
    QVERIFY2(r.finished && r.exit_code == 1, qPrintable(text(r)));
    QVERIFY2(r.out.isEmpty(), qPrintable(text(r)));
    QCOMPARE(r.err.trimmed().count('\n'), 0);
    QVERIFY2(r.err.contains("doctor --cluster runs under mpirun with one rank per host, e.g. "
                            "mpirun --host h0,h1,h2,h3 -np 4 shardlab doctor --cluster"),
             qPrintable(text(r)));
  }

  void gpuOptionsRefused() {
    const ProcessOutcome r =
        run_process(SHARDLAB_CLI, {"doctor", "--cluster", "--groups", "kernels"});
    QVERIFY2(r.finished && r.exit_code == 2, qPrintable(text(r)));
    QVERIFY2(r.err.contains("leave out --device and --groups"), qPrintable(text(r)));
  }

  void netnsClusterHealthyThenSlowHost() {
    NetnsCluster c(4);
    SHARDLAB_REQUIRE_CLUSTER(c);
    const QStringList args{"--host",     "h0,h1,h2,h3", "-np",       "4",
                           SHARDLAB_CLI, "doctor",      "--cluster", "--json"};
    const ProcessOutcome healthy = c.run(0, "mpirun", args, 60000);
    QVERIFY2(healthy.finished, qPrintable(text(healthy)));
    const QJsonObject h = parse(healthy);
    QVERIFY2(!h.isEmpty(), qPrintable(text(healthy)));
    verify_figures(h, 4);
    for (int r = 0; r < 4; ++r)
      QCOMPARE(h["hosts"].toArray()[r].toObject()["host"].toString(), QString("h%1").arg(r));
    QVERIFY2(h["notes"].toArray().isEmpty(), qPrintable(text(healthy)));
    // A healthy cluster: nobody named (GEMM and memory are measured one host at a time, each the
    // best of 5, and this suite runs alone: RUN_SERIAL), exit 0.
    QVERIFY2(h["findings"].toArray().isEmpty(), qPrintable(text(healthy)));
    QCOMPARE(healthy.exit_code, 0);

    // `shardlab plan --calibrate --links` on host h0 takes these links as the cluster's links
    // between nodes: the median pair, computed here from the doctor's own pairs.
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString links = dir.filePath("links.json"), cluster = dir.filePath("cluster.json");
    QFile lf(links);
    QVERIFY(lf.open(QIODevice::WriteOnly));
    lf.write(healthy.out.toUtf8());
    lf.close();
    const ProcessOutcome cal =
        c.run(0, SHARDLAB_CLI, {"plan", "--calibrate", "--links", links, "--out", cluster}, 120000);
    QVERIFY2(cal.exit_code == 0 && !cal.err.contains("not the network"), qPrintable(text(cal)));
    std::vector<double> gbs, lat;
    for (const QJsonValue& p : h["pairs"].toArray()) {
      gbs.push_back(p.toObject()["gb_per_second"].toDouble());
      lat.push_back(p.toObject()["latency_us"].toDouble());
    }
    QCOMPARE(gbs.size(), size_t{6});  // 4 hosts, every pair
    const auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    };
    QFile cf(cluster);
    QVERIFY(cf.open(QIODevice::ReadOnly));
    const QJsonObject inter =
        QJsonDocument::fromJson(cf.readAll()).object()["inter_node"].toObject();
    QVERIFY(std::abs(inter["busbw_gb_per_second"].toDouble() / median(gbs) - 1) < 1e-9);
    QVERIFY(std::abs(inter["latency_us"].toDouble() / median(lat) - 1) < 1e-9);

    // h1's port at the bridge sends at most 100 Mbit/s (12.5 MB/s) towards h1.
    const ProcessOutcome tc = run_process(
        "ip", {"netns", "exec", c.name() + "-br", "tc", "qdisc", "add", "dev", c.name() + "-v1",
               "root", "tbf", "rate", "100mbit", "burst", "64kb", "latency", "100ms"});
    if (tc.exit_code != 0) QSKIP(qPrintable("tc tbf is refused here: " + tc.err.trimmed()));
    // This time as a user starts it: `shardlab doctor --hosts` launches the same mpirun.
    const ProcessOutcome slow =
        c.run(0, SHARDLAB_CLI, {"doctor", "--hosts", "h0,h1,h2,h3", "--json"}, 60000);
    QVERIFY2(slow.finished && slow.exit_code == 1, qPrintable(text(slow)));
    const QJsonObject s = parse(slow);
    QVERIFY2(!s.isEmpty(), qPrintable(text(slow)));
    QStringList network;
    for (const QJsonValue& f : s["findings"].toArray())
      if (f.toString().contains("network")) network << f.toString();
    QVERIFY2(network.size() == 1 &&
                 network[0].startsWith("host h1: links to the other hosts at ") &&
                 network[0].endsWith("— its network is slow"),
             qPrintable(text(slow)));
    const double h1 = s["hosts"].toArray()[1].toObject()["link_gb_per_second"].toDouble();
    QVERIFY2(h1 < 0.05, qPrintable(text(slow)));  // 2 x 12.5 MB/s at most, ping-pong
  }
};

QTEST_GUILESS_MAIN(TestDoctorCluster)
#include "tst_doctor_cluster.moc"
