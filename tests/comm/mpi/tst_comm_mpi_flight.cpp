// The flight recorder on the mpi backend: mpirun -np 2 on mpi_flight_skip, where rank 1 skips a
// world all-reduce. Rank 0 must time out, say where its flight record went, and the record must
// show the earlier operations completed (a sub-group's under its own name) and that all-reduce
// timed out.
#include <QtTest>

#include "tests/common/process.h"

using namespace shardlab;

class TstCommMpiFlight : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void skippedCollectiveIsInRank0sFlightRecord() {
    QTemporaryDir dir;
    const QString fdir = dir.path() + "/flight";
    test::ProcessOptions options;
    options.start_timeout_ms = 10000;
    options.timeout_ms = 60000;
    const test::ProcessOutcome mpirun = test::run_process(
        SHARDLAB_MPIEXEC, {"-n", "2", "--oversubscribe", SHARDLAB_MPI_FLIGHT_SKIP, fdir}, options);
    const bool finished = mpirun.finished;
    const QString out = mpirun.out, err = mpirun.err;
    QVERIFY2(finished, "mpirun did not finish in 60 s");
    QVERIFY2(!out.contains("completed"), qPrintable(out));

    const QString txt = fdir + "/flight-rank0.txt";
    QVERIFY2(err.contains("mpi_flight_skip: all_reduce on group world (seq 4) timed out"),
             qPrintable(err));
    QVERIFY2(err.contains("; flight record (last 5 operations of rank 0) written to " + txt),
             qPrintable(err));
    QVERIFY2(!QFile::exists(fdir + "/flight-rank1.txt"), "rank 1 had nothing fail");

    QFile json(fdir + "/flight-rank0.json");
    QVERIFY(json.open(QIODevice::ReadOnly));
    const QJsonObject o = QJsonDocument::fromJson(json.readAll()).object();
    QCOMPARE(o["rank"].toInt(), 0);
    const QJsonArray e = o["entries"].toArray();
    QCOMPARE(e.size(), 5);
    const char* groups[] = {"world", "solo[0]", "world", "world", "world"};
    const int seqs[] = {0, 0, 2, 3, 4};  // the split took world's seq 1
    for (int i = 0; i < 5; ++i) {
      const QJsonObject x = e[i].toObject();
      QCOMPARE(x["group"].toString(), QString(groups[i]));
      QCOMPARE(x["seq"].toInt(), seqs[i]);
      QCOMPARE(x["state"].toString(), QString(i < 4 ? "completed" : "timed_out"));
    }
    QCOMPARE(e[4].toObject()["op"].toString(), QString("all_reduce"));
    QVERIFY(e[4].toObject()["error"].toString().contains("timed out after 1500 ms on rank 0"));

    QFile text(txt);
    QVERIFY(text.open(QIODevice::ReadOnly));
    const QStringList lines = QString::fromUtf8(text.readAll()).split('\n', Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 6);
    QVERIFY2(lines[5].startsWith("#4 all_reduce world rank 0/2 4.0 KiB issued "),
             qPrintable(lines[5]));
    QVERIFY2(lines[5].contains("-- TIMED OUT at "), qPrintable(lines[5]));
  }
};

QTEST_GUILESS_MAIN(TstCommMpiFlight)
#include "tst_comm_mpi_flight.moc"
