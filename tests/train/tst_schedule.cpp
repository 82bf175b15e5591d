// Learning-rate schedules against the closed forms written out here.
#include <QtTest>

#include <cmath>

#include "engine/core/error.h"
#include "engine/train/lr_schedule.h"

using namespace shardlab;

class TestSchedule : public QObject {
  Q_OBJECT
 private slots:
  void constantIsConstant() {
    LrSchedule s({"constant", 0, 0.0}, 0.05, 100);
    for (int64_t t : {0, 1, 50, 99, 500}) QCOMPARE(s.at(t), 0.05);
  }

  void warmupCosine() {
    // lr 1.0, 10 warm-up steps, 110 steps in all, decaying to 0.1.
    LrSchedule s({"warmup_cosine", 10, 0.1}, 1.0, 110);
    QCOMPARE(s.at(0), 0.1);  // 1/10 of the rate on the first step
    QCOMPARE(s.at(4), 0.5);
    QCOMPARE(s.at(9), 1.0);   // full rate at the end of warm-up
    QCOMPARE(s.at(10), 1.0);  // cosine starts at the top
    // Halfway through the 99 decay intervals: min + (max - min) * (1 + cos(pi/2)) / 2 = 0.55.
    const double mid = 0.1 + 0.9 * 0.5 * (1.0 + std::cos(M_PI * 49.5 / 99.0));
    QVERIFY(std::abs(s.at(59) - 0.1 - 0.9 * 0.5 * (1.0 + std::cos(M_PI * 49.0 / 99.0))) < 1e-12);
    QVERIFY(std::abs(mid - 0.55) < 1e-12);
    QVERIFY(std::abs(s.at(109) - 0.1) < 1e-12);  // ends at min_lr on the last step
    QVERIFY(std::abs(s.at(500) - 0.1) < 1e-12);  // and stays there
    for (int64_t t = 11; t < 110; ++t) QVERIFY(s.at(t) <= s.at(t - 1));
  }

  void rejectsBadSchedules() {
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, LrSchedule({"linear", 0, 0.0}, 1.0, 10));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, LrSchedule({"constant", 0, 0.0}, 0.0, 10));
  }
};

QTEST_APPLESS_MAIN(TestSchedule)
#include "tst_schedule.moc"
