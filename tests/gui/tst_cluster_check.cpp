// The app's cluster check (gui/cluster_check.h): a `doctor --cluster --json` document of three
// hosts, h1's links slow, shown as a heat map (the slow pairs red, the healthy one green, both
// halves of the matrix alike, the diagonal empty), the per-host table and the finding in words;
// something that is not such a document is refused; and the real command started on one host
// (a world of 1) ends with its own error line in the dialog, not a crash or a hang.
#include <QtTest>

#include <QDir>
#include <QListWidget>
#include <QTableWidget>

#include "gui/cluster_check.h"

using shardlab::gui::ClusterCheckDialog;

namespace {

// As `doctor --cluster --json` prints it (figures from the README's run, h1 limited by tc tbf).
const char* kSlowH1 = R"({"command": "doctor --cluster", "seconds": 3.2,
  "hosts": [
    {"rank": 0, "host": "h0", "gemm_gflops": 92.8, "memory_gb_per_second": 21.7,
     "link_gb_per_second": 1.43, "latency_us": 16.9},
    {"rank": 1, "host": "h1", "gemm_gflops": 94.2, "memory_gb_per_second": 26.6,
     "link_gb_per_second": 0.0239, "latency_us": 18.4},
    {"rank": 2, "host": "h2", "gemm_gflops": 100.6, "memory_gb_per_second": 27.9,
     "link_gb_per_second": 1.43, "latency_us": 24.2}],
  "pairs": [
    {"a": 0, "b": 1, "gb_per_second": 0.024, "latency_us": 17.0},
    {"a": 0, "b": 2, "gb_per_second": 2.83, "latency_us": 16.9},
    {"a": 1, "b": 2, "gb_per_second": 0.0238, "latency_us": 19.8}],
  "findings": ["host h1: links to the other hosts at 23.9 MB/s against a median of 2.83 GB/s between the others — its network is slow"],
  "named": ["h1"], "notes": []})";

bool red(const QTableWidgetItem* cell) {
  const QColor c = cell->background().color();
  return c.red() > 200 && c.green() < 120;
}
bool green(const QTableWidgetItem* cell) {
  const QColor c = cell->background().color();
  return c.green() > 170 && c.red() < 150;
}

}  // namespace

class TestClusterCheck : public QObject {
  Q_OBJECT
 private slots:
  void heatMapOfASlowHost() {
    ClusterCheckDialog d;
    QVERIFY(d.showReport(kSlowH1));
    QTableWidget* m = d.matrix();
    QCOMPARE(m->rowCount(), 3);
    QCOMPARE(m->columnCount(), 3);
    QCOMPARE(m->horizontalHeaderItem(1)->text(), QString("h1"));
    for (int i = 0; i < 3; ++i) QCOMPARE(m->item(i, i)->text(), QString("-"));
    QCOMPARE(m->item(0, 1)->text(), QString("24 MB/s"));
    QCOMPARE(m->item(1, 0)->text(), QString("24 MB/s"));
    QCOMPARE(m->item(0, 2)->text(), QString("2.83 GB/s"));
    QVERIFY(red(m->item(0, 1)) && red(m->item(1, 0)) && red(m->item(1, 2)) && red(m->item(2, 1)));
    QVERIFY(green(m->item(0, 2)) && green(m->item(2, 0)));
    QVERIFY2(m->item(0, 1)->toolTip().contains("h0 and h1: 24 MB/s, latency 17 us"),
             qPrintable(m->item(0, 1)->toolTip()));
    QCOMPARE(d.hostTable()->rowCount(), 3);
    QCOMPARE(d.hostTable()->item(1, 0)->text(), QString("h1"));
    QCOMPARE(d.hostTable()->item(1, 3)->text(), QString("23.9 MB/s"));
    QCOMPARE(d.findings()->count(), 1);
    QVERIFY(d.findings()->item(0)->text().startsWith("host h1: links to the other hosts"));
    QCOMPARE(d.status(), QString("3 hosts checked: 1 finding(s)"));
    // For a person to look at (not compared): <tmp>/cluster_check.png.
    d.grab().save(QDir::temp().filePath("cluster_check.png"));
  }

  void notADocument() {
    ClusterCheckDialog d;
    QVERIFY(!d.showReport("{\"command\": \"doctor\", \"checks\": []}"));
    QVERIFY(!d.showReport("garbage"));
    QVERIFY2(d.status().contains("Not a `doctor --cluster --json` document"),
             qPrintable(d.status()));
  }

  void oneHostIsRefusedByTheCommand() {
    if (QStandardPaths::findExecutable("mpirun").isEmpty()) QSKIP("mpirun not found");
    qputenv("OMPI_ALLOW_RUN_AS_ROOT", "1");
    qputenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    ClusterCheckDialog d;
    QSignalSpy done(&d, &ClusterCheckDialog::finished);
    d.run(SHARDLAB_CLI, "localhost");
    QVERIFY(done.wait(60000));
    QCOMPARE(done.first().at(0).toBool(), false);
    QVERIFY2(d.status().contains("The check failed (exit 1): shardlab: error: a world of 1 rank"),
             qPrintable(d.status()));
  }
};

QTEST_MAIN(TestClusterCheck)
#include "tst_cluster_check.moc"
