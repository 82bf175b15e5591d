// The triad and optimizer benchmarks on a tiny size: a sanity check that they run and report
// positive, finite, self-consistent numbers (timings themselves are not tested).
#include <QtTest>

#include <cmath>
#include <sstream>

#include "engine/bench/optimizer_bench.h"
#include "engine/bench/triad.h"
#include "engine/core/error.h"
#include "engine/optim/optimizer.h"

using namespace shardlab;

namespace {
bool positive_finite(double x) {
  return std::isfinite(x) && x > 0.0;
}
}  // namespace

class TestOptimBench : public QObject {
  Q_OBJECT
 private slots:
  void triadReportsBandwidth() {
    const TriadResult t = measure_triad(4096, 3);
    QCOMPARE(t.n, int64_t(4096));
    QCOMPARE(t.reps, 3);
    QVERIFY(positive_finite(t.best_seconds));
    QVERIFY(positive_finite(t.gb_per_s));
    // STREAM convention: 3 arrays x 4 bytes per element.
    QVERIFY(std::abs(t.gb_per_s - 12.0 * 4096 / t.best_seconds / 1e9) <= 1e-9 * t.gb_per_s);
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, measure_triad(0, 3));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, measure_triad(16, 0));
  }

  void optimizerBenchRowsAndTable() {
    OptimizerBenchOptions o;
    o.n = 3000;
    o.warmup = 1;
    o.reps = 3;
    std::ostringstream out;
    const auto rows = run_optimizer_bench(o, out);
    QCOMPARE(rows.size(), optimizer_names().size());
    const std::string table = out.str();
    // sgd runs with momentum: every optimizer here keeps state.
    const int expected_bytes[] = {20, 28, 28, 20, 20};
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      QCOMPARE(r.optimizer, optimizer_names()[i]);
      QCOMPARE(r.n, int64_t(3000));
      QCOMPARE(r.bytes_per_param, expected_bytes[i]);
      QVERIFY(positive_finite(r.best_seconds));
      QVERIFY(r.median_seconds >= r.best_seconds);
      QVERIFY(positive_finite(r.params_per_s));
      QVERIFY(positive_finite(r.gb_per_s));
      QVERIFY(positive_finite(r.triad_gb_per_s));
      QVERIFY(positive_finite(r.triad_ratio));
      QVERIFY(std::abs(r.triad_ratio - r.gb_per_s / r.triad_gb_per_s) <= 1e-12 * r.triad_ratio);
      QVERIFY2(table.find(r.optimizer) != std::string::npos, table.c_str());
    }
    QVERIFY2(table.find("triad") != std::string::npos, table.c_str());
  }

  void optimizerBenchSubsetAndBadOptions() {
    OptimizerBenchOptions o;
    o.n = 100;
    o.warmup = 0;
    o.reps = 1;
    o.optimizers = {"adamw"};
    std::ostringstream out;
    const auto rows = run_optimizer_bench(o, out);
    QCOMPARE(rows.size(), size_t(1));
    QCOMPARE(rows[0].optimizer, std::string("adamw"));

    o.optimizers = {"adam", "nope"};
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, run_optimizer_bench(o, out));
    o.optimizers = {};
    o.n = 0;
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, run_optimizer_bench(o, out));
    o.n = 100;
    o.reps = 0;
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, run_optimizer_bench(o, out));
  }
};

QTEST_APPLESS_MAIN(TestOptimBench)
#include "tst_optim_bench.moc"
