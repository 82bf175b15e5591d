// Backend-independent parts of the communication layer: chunking of uneven counts, the
// nccl-tests bandwidth definitions, and the base class's argument checks (run on a singleton
// threads group, the cheapest real communicator).
#include <QtTest>

#include "engine/comm/comm_record.h"
#include "engine/comm/communicator.h"
#include "engine/comm/threads/world.h"

using namespace shardlab;

class TestCommRecord : public QObject {
  Q_OBJECT
 private slots:
  void chunkRangeSplitsUnevenCounts_data() {
    QTest::addColumn<qint64>("total");
    QTest::addColumn<int>("parts");
    QTest::addColumn<QList<qint64>>("sizes");
    QTest::newRow("10 over 4") << qint64(10) << 4 << QList<qint64>{3, 3, 2, 2};
    QTest::newRow("even") << qint64(12) << 4 << QList<qint64>{3, 3, 3, 3};
    QTest::newRow("fewer than parts") << qint64(2) << 5 << QList<qint64>{1, 1, 0, 0, 0};
    QTest::newRow("empty") << qint64(0) << 3 << QList<qint64>{0, 0, 0};
    QTest::newRow("prime over 7") << qint64(97) << 7 << QList<qint64>{14, 14, 14, 14, 14, 14, 13};
  }
  void chunkRangeSplitsUnevenCounts() {
    QFETCH(qint64, total);
    QFETCH(int, parts);
    QFETCH(QList<qint64>, sizes);
    int64_t next = 0;
    for (int p = 0; p < parts; ++p) {
      const IndexRange r = chunk_range(total, parts, p);
      QCOMPARE(r.begin, next);  // contiguous, in rank order
      QCOMPARE(r.size(), sizes[p]);
      next = r.end;
    }
    QCOMPARE(next, total);  // covers everything
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, chunk_range(total, parts, parts));
  }

  // nccl-tests, doc/PERFORMANCE.md: busbw = algbw x 2(n-1)/n (all-reduce), (n-1)/n (reduce-scatter,
  // all-gather), 1 (broadcast, send, recv).
  void busFactorsFollowNcclTests() {
    for (int n : {2, 4, 8}) {
      QCOMPARE(bus_factor(CommOp::AllReduce, n), 2.0 * (n - 1) / n);
      QCOMPARE(bus_factor(CommOp::ReduceScatter, n), double(n - 1) / n);
      QCOMPARE(bus_factor(CommOp::AllGather, n), double(n - 1) / n);
      QCOMPARE(bus_factor(CommOp::Broadcast, n), 1.0);
      QCOMPARE(bus_factor(CommOp::Send, n), 1.0);
    }
    QCOMPARE(bus_factor(CommOp::AllReduce, 1), 0.0);  // one rank moves nothing over a bus
  }

  void recordBandwidths() {
    CommRecord r;
    r.op = CommOp::AllReduce;
    r.group_size = 4;
    r.bytes = 2'000'000'000;  // 2 GB in 0.5 s
    r.start = Clock::time_point{};
    r.end = r.start + std::chrono::milliseconds(500);
    QCOMPARE(r.seconds(), 0.5);
    QCOMPARE(r.algbw_gbs(), 4.0);
    QCOMPARE(r.busbw_gbs(), 4.0 * 1.5);
    r.end = r.start;  // zero duration: no division by zero
    QCOMPARE(r.algbw_gbs(), 0.0);
  }

  // Checked by the base class before any backend sees the call (a one-rank threads world
  // driven from this thread).
  void baseRejectsBadArguments() {
    auto world = make_thread_world(1, {});
    Communicator& c = *world[0];
    std::vector<float> buf(8), out(3);
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, c.reduce_scatter(buf, buf, ReduceOp::Sum));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, c.all_gather(buf, buf));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, c.reduce_scatter(buf, out, ReduceOp::Sum));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, c.broadcast(buf, 1));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, c.send(buf, 0, 0));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, c.recv(buf, 3, 0));
    // Separate buffers of the right sizes work.
    std::vector<float> whole(8, 2.0f), mine(8);
    c.reduce_scatter(whole, mine, ReduceOp::Sum);
    QCOMPARE(mine[7], 2.0f);
  }
};

QTEST_APPLESS_MAIN(TestCommRecord)
#include "tst_comm_record.moc"
