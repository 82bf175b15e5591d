// A real Prometheus server (Debian's prometheus) scrapes /metrics of a live `shardlab run --http`
// (a temporary config pointing at the run's port, loopback only, a 1 s scrape interval), and its
// query API then returns shardlab_step for every rank of the 2x2x2 gpt-3d job, with their
// coordinates as labels, and the collector's own metrics.
#include <QtTest>

#include <QFile>
#include <QTemporaryDir>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tests/web/web_test_util.h"

using namespace shardlab::test;

class TestPrometheus : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    const QString gone = missing({QStringLiteral("prometheus")});
    if (!gone.isEmpty()) QSKIP(qPrintable(gone));
  }

  void prometheusScrapesEveryRank() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    ServingChild run(
        {QStringLiteral("run"), QStringLiteral(SHARDLAB_SOURCE_DIR "/resources/jobs/gpt-3d.json"),
         QStringLiteral("--http"), QStringLiteral("127.0.0.1:0"), QStringLiteral("--no-record"),
         QStringLiteral("--quiet"), QStringLiteral("--set"), QStringLiteral("train.steps=5000")},
        dir.path());
    const QString url = run.url();
    QVERIFY2(!url.isEmpty(), qPrintable("no URL printed:\n" + run.output()));
    const QString target = url.mid(7).chopped(1);  // 127.0.0.1:PORT

    const uint16_t prom_port = free_port();
    QFile config(dir.filePath(QStringLiteral("prometheus.yml")));
    QVERIFY(config.open(QIODevice::WriteOnly));
    config.write(QStringLiteral("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                                "scrape_configs:\n  - job_name: shardlab\n"
                                "    scrape_interval: 1s\n    static_configs:\n"
                                "      - targets: ['%1']\n")
                     .arg(target)
                     .toUtf8());
    config.close();
    QProcess prom;
    prom.setProcessChannelMode(QProcess::MergedChannels);
    prom.start(QStringLiteral("/usr/bin/prometheus"),
               {QStringLiteral("--config.file=") + config.fileName(),
                QStringLiteral("--storage.tsdb.path=") + dir.filePath(QStringLiteral("tsdb")),
                QStringLiteral("--web.listen-address=127.0.0.1:%1").arg(prom_port)});
    QVERIFY2(prom.waitForStarted(30000), qPrintable(prom.errorString()));
    auto stop = qScopeGuard([&] {
      prom.terminate();
      if (!prom.waitForFinished(10000)) prom.kill();
      prom.waitForFinished(5000);
    });

    // Every rank's shardlab_step, from Prometheus' own storage (a scrape each second).
    nlohmann::json result;
    std::string last;
    QElapsedTimer t;
    t.start();
    bool all = false;
    while (!all && t.elapsed() < 60000 && run.running()) {
      const HttpReply r = http_get(prom_port, "/api/v1/query?query=shardlab_step");
      last = r.body;
      if (r.status == 200) {
        const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
        if (j.is_object() && j.value("status", "") == "success") {
          result = j["data"]["result"];
          all = result.is_array() && result.size() == 8;
        }
      }
      if (!all) QTest::qWait(500);
    }
    QVERIFY2(all, qPrintable(QString::fromStdString("Prometheus did not return 8 series: " + last) +
                             "\nprometheus: " + QString::fromUtf8(prom.readAll()) +
                             "\nrun: " + run.output()));
    std::set<std::string> ranks;
    for (const auto& s : result) {
      const auto& m = s["metric"];
      ranks.insert(m.value("rank", ""));
      QVERIFY(m.contains("pp") && m.contains("tp") && m.contains("dp"));
      // Prometheus keeps its own job label (the scrape job); the run's becomes exported_job.
      QCOMPARE(QString::fromStdString(m.value("exported_job", "")), QStringLiteral("gpt-3d"));
      QCOMPARE(QString::fromStdString(m.value("job", "")), QStringLiteral("shardlab"));
      QVERIFY(std::stod(s["value"][1].get<std::string>()) >= 1);
    }
    QCOMPARE(ranks, (std::set<std::string>{"0", "1", "2", "3", "4", "5", "6", "7"}));

    // The collector's own figures are there too: 8 ranks streaming.
    const HttpReply c = http_get(prom_port, "/api/v1/query?query=shardlab_collector_connections");
    const nlohmann::json cj = nlohmann::json::parse(c.body, nullptr, false);
    QVERIFY2(cj.is_object() && cj["data"]["result"].size() == 1, c.body.c_str());
    QCOMPARE(cj["data"]["result"][0]["value"][1].get<std::string>(), std::string("8"));
  }
};

QTEST_GUILESS_MAIN(TestPrometheus)
#include "tst_prometheus.moc"
