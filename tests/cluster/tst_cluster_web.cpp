// The dashboard reached from another machine, on a test cluster of network namespaces
// (netns_cluster.h): `shardlab run --hosts h1:2,h2:2 --http <host 0's address>:0` on host 0, and on
// host 3 a headless Chromium (tests/web/browser_check.py) that is sent to the sign-in page without
// the token and sees the run live after entering it, and a real Prometheus that scrapes /metrics
// with the bearer token (every rank, with its host label) and is refused (401) without it.
// Skips, saying why, without root, Chromium/Selenium or Prometheus.
#include <QtTest>

#include <QFile>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <nlohmann/json.hpp>

#include "tests/cluster/netns_cluster.h"
#include "tests/web/web_test_util.h"

using shardlab::test::NetnsCluster;
using shardlab::test::ProcessOutcome;

namespace {

const QString kMlp = QStringLiteral(SHARDLAB_SOURCE_DIR "/resources/jobs/fashion_mlp.json");
const QString kCheck = QStringLiteral(SHARDLAB_SOURCE_DIR "/tests/web/browser_check.py");

// GET `url` from host `host`: "STATUS\nBODY" (python3's urllib, run there).
QString get_on(const NetnsCluster& c, int host, const QString& url) {
  const QString py =
      "import sys, urllib.request, urllib.error\n"
      "try:\n"
      "  r = urllib.request.urlopen(sys.argv[1], timeout=10); print(r.status); "
      "print(r.read().decode())\n"
      "except urllib.error.HTTPError as e:\n"
      "  print(e.code); print(e.read().decode())\n";
  return c.run(host, "python3", {"-c", py, url}, 30000).out;
}

}  // namespace

class TestClusterWeb : public QObject {
  Q_OBJECT

 private slots:
  void dashboardFromAnotherHost() {
    NetnsCluster c(4);
    SHARDLAB_REQUIRE_CLUSTER(c);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    QProcess run;
    run.setWorkingDirectory(dir.path());  // the dashboard's token file goes here
    run.setProcessEnvironment(c.mpi_env());
    run.setProcessChannelMode(QProcess::MergedChannels);
    c.start(run, 0, SHARDLAB_CLI,
            {"run", kMlp, "--hosts", "h1:2,h2:2", "--http", c.address(0) + ":0", "--no-record",
             "--quiet", "--set", "parallel.backend=mpi", "--set", "train.steps=1000000", "--set",
             "train.eval_every=0"});
    QVERIFY(run.waitForStarted(10000));
    auto stop = qScopeGuard([&] {
      run.terminate();  // passed on to mpirun, which ends the ranks
      if (!run.waitForFinished(30000)) run.kill();
    });
    const QRegularExpression at("dashboard at (http://" + QRegularExpression::escape(c.address(0)) +
                                ":\\d+/)");
    QString out, url;
    QElapsedTimer t;
    t.start();
    while (url.isEmpty() && t.elapsed() < 30000 && run.state() != QProcess::NotRunning) {
      run.waitForReadyRead(200);
      out += QString::fromUtf8(run.readAll());
      if (const auto m = at.match(out); m.hasMatch()) url = m.captured(1);
    }
    QVERIFY2(!url.isEmpty(), qPrintable(out));
    // Written right after the URL is printed.
    const QString token_file = dir.filePath("shardlab-web.token");
    for (int i = 0; i < 100 && !QFile::exists(token_file); ++i) QTest::qWait(100);
    QVERIFY2(QFile::exists(token_file), qPrintable(out));

    // From host 3, without the token: the API and /metrics are refused.
    const QString refused = get_on(c, 3, url + "metrics");
    QVERIFY2(refused.startsWith("401\n"), qPrintable(refused));

    // Chromium on host 3: the sign-in page first, then the live page with the job's 4 ranks.
    const QString browsers = shardlab::test::missing({"chromium", "chromedriver", "selenium"});
    if (browsers.isEmpty()) {
      const ProcessOutcome b = c.run(
          3, "/usr/bin/python3", {kCheck, url, "--ranks", "4", "--token-file", token_file}, 180000);
      if (b.exit_code == 2) QSKIP(qPrintable("Chromium did not start on host 3: " + b.err));
      QVERIFY2(b.exit_code == 0, qPrintable(b.out + b.err));
      qInfo("%s", qPrintable(b.out.trimmed()));
    } else {
      qWarning("the browser check is skipped: %s", qPrintable(browsers));
    }

    // Prometheus on host 3: one job with the bearer token, one without.
    if (!shardlab::test::missing({"prometheus"}).isEmpty())
      QSKIP("prometheus is not installed (the browser check above ran)");
    const QString target = url.mid(7).chopped(1);
    QFile config(dir.filePath("prometheus.yml"));
    QVERIFY(config.open(QIODevice::WriteOnly));
    config.write(QString("global:\n  scrape_interval: 1s\n"
                         "scrape_configs:\n"
                         "  - job_name: shardlab\n    authorization:\n      type: Bearer\n"
                         "      credentials_file: %1\n    static_configs:\n"
                         "      - targets: ['%2']\n"
                         "  - job_name: noauth\n    static_configs:\n"
                         "      - targets: ['%2']\n")
                     .arg(token_file, target)
                     .toUtf8());
    config.close();
    QProcess prom;
    prom.setProcessChannelMode(QProcess::MergedChannels);
    c.start(prom, 3, "/usr/bin/prometheus",
            {"--config.file=" + config.fileName(), "--storage.tsdb.path=" + dir.filePath("tsdb"),
             "--web.listen-address=127.0.0.1:9090"});
    QVERIFY(prom.waitForStarted(30000));
    auto stop_prom = qScopeGuard([&] {
      prom.terminate();
      if (!prom.waitForFinished(10000)) prom.kill();
    });
    QString steps, targets;
    t.restart();
    bool all = false;
    while (!all && t.elapsed() < 60000) {
      steps = get_on(c, 3, "http://127.0.0.1:9090/api/v1/query?query=shardlab_step");
      all = steps.count("\"__name__\":\"shardlab_step\"") == 4 &&
            steps.count("\"host\":\"h1\"") == 2 && steps.count("\"host\":\"h2\"") == 2;
      if (!all) QTest::qWait(500);
    }
    QVERIFY2(all, qPrintable("no 4 series with their hosts: " + steps + "\n" +
                             QString::fromUtf8(prom.readAll()).right(2000)));
    // ... and the job without the token was refused at every scrape.
    t.restart();
    bool refused_401 = false;
    while (!refused_401 && t.elapsed() < 20000) {
      targets = get_on(c, 3, "http://127.0.0.1:9090/api/v1/targets");
      const nlohmann::json j = nlohmann::json::parse(
          targets.mid(targets.indexOf('\n') + 1).toStdString(), nullptr, false);
      if (j.is_object() && j.contains("data"))
        for (const auto& target : j["data"]["activeTargets"])
          if (target["labels"].value("job", "") == "noauth" &&
              target.value("lastError", "").find("401 Unauthorized") != std::string::npos)
            refused_401 = true;
      if (!refused_401) QTest::qWait(500);
    }
    QVERIFY2(refused_401, qPrintable(targets));
  }
};

QTEST_GUILESS_MAIN(TestClusterWeb)
#include "tst_cluster_web.moc"
