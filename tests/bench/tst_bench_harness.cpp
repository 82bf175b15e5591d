// engine/bench/harness.h, which every `shardlab bench` measures with: the median and best of a
// set of timings, the warm-up/timed loop and the usable-core count.
#include <QtTest>

#include <chrono>
#include <thread>
#include <vector>

#include "engine/bench/harness.h"
#include "engine/core/error.h"

using namespace shardlab;

class TestBenchHarness : public QObject {
  Q_OBJECT
 private slots:
  void medianOfOddEvenAndNone() {
    QCOMPARE(bench::median({}), 0.0);
    QCOMPARE(bench::median({5.0}), 5.0);
    QCOMPARE(bench::median({3.0, 1.0, 2.0}), 2.0);
    QCOMPARE(bench::median({4.0, 1.0, 3.0, 2.0}), 2.5);  // the mean of the middle two
    QCOMPARE(bench::median({7.0, 7.0, 1.0, 100.0, 7.0}), 7.0);
  }

  void bestIsTheSmallest() {
    QCOMPARE(bench::best({}), 0.0);
    QCOMPARE(bench::best({3.0, 0.5, 2.0}), 0.5);
  }

  void warmupIsDiscardedAndEveryTimingFloored() {
    std::vector<double> results = {10.0, 20.0, 0.0, 3.0, -1.0};
    size_t calls = 0;
    const std::vector<double> kept = bench::sample_seconds(2, 3, [&] { return results[calls++]; });
    QCOMPARE(calls, size_t(5));
    // The two warm-up results (10, 20) are dropped; 0 and -1 are raised to the floor.
    QCOMPARE(kept, (std::vector<double>{bench::kMinSeconds, 3.0, bench::kMinSeconds}));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, bench::sample_seconds(0, 0, [] { return 1.0; }));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, bench::sample_seconds(-1, 1, [] { return 1.0; }));
  }

  void timeEachTimesTheWork() {
    int runs = 0;
    const std::vector<double> t = bench::time_each(1, 2, [&] {
      ++runs;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    });
    QCOMPARE(runs, 3);
    QCOMPARE(t.size(), size_t(2));
    for (double s : t) QVERIFY2(s >= 0.004 && s < 5.0, qPrintable(QString::number(s)));
  }

  void usableCoresIsAtLeastOneAndAtMostTheMachine() {
    const int cores = bench::usable_cores();
    QVERIFY(cores >= 1);
    const unsigned hw = std::thread::hardware_concurrency();
    if (hw > 0) QVERIFY(cores <= static_cast<int>(hw));
  }
};

QTEST_GUILESS_MAIN(TestBenchHarness)
#include "tst_bench_harness.moc"
