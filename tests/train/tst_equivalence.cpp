// The equivalence rule (engine/train/equivalence.h) on its own: which batch cuts set the noise
// floor for each kind of layout, the tolerance formula against the numbers written out here, the
// ceiling that refuses an inconsistent floor, and max_rel_diff's edge cases (sizes, NaN, zeros).
// That the rule passes correct sharded runs and fails broken ones is shown by tests/parallel.
#include <QtTest>

#include <cmath>
#include <limits>

#include "engine/train/equivalence.h"

using namespace shardlab;

namespace {

JobSpec job_with(const std::string& strategy, int64_t world, int64_t batch, int64_t accumulation,
                 int64_t pp = 1, int64_t tp = 1, int64_t dp = 1, int64_t micro = 1) {
  JobSpec j;
  j.train.batch_size = batch;
  j.train.accumulation_steps = accumulation;
  j.parallel.strategy = strategy;
  j.parallel.world_size = world;
  j.parallel.pp = pp;
  j.parallel.tp = tp;
  j.parallel.dp = dp;
  j.parallel.micro_batches = micro;
  return j;
}

std::vector<int64_t> v(std::initializer_list<int64_t> l) {
  return l;
}

}  // namespace

class TestEquivalence : public QObject {
  Q_OBJECT

 private slots:
  void cutsFollowTheLayout() {
    // 1-D: world x accumulation first, then the smallest other divisors of the batch.
    QCOMPARE(reordering_cuts(job_with("zero2", 4, 64, 1)), v({4, 2, 8}));
    QCOMPARE(reordering_cuts(job_with("ddp", 2, 24, 3)), v({6, 2, 3}));
    // 3-D: dp x micro-batches (accumulation is 1 there).
    QCOMPARE(reordering_cuts(job_with("zero1", 8, 16, 1, 2, 2, 2, 4)), v({8, 2, 4}));
    // Pure tp with one micro-batch cuts nothing itself: the divisors of the batch.
    QCOMPARE(reordering_cuts(job_with("ddp", 2, 6, 1, 1, 2, 1, 1)), v({2, 3, 6}));
    // A prime batch has one cut; a batch of one none.
    QCOMPARE(reordering_cuts(job_with("ddp", 1, 7, 1)), v({7}));
    QCOMPARE(reordering_cuts(job_with("ddp", 1, 1, 1)), v({}));
  }

  void toleranceFormula() {
    // max(16 x floor, 16 x sqrt(steps) x 2^-24), written out.
    QCOMPARE(equivalence_tolerance(1e-5, 5), 16 * 1e-5);
    QCOMPARE(equivalence_tolerance(0.0, 4), 16 * 2.0 * std::ldexp(1.0, -24));
    QCOMPARE(equivalence_tolerance(0.0, 0), 16 * std::ldexp(1.0, -24));
    NoiseFloor f;
    f.params = 1e-6;
    f.losses = 2e-7;
    f.grad_norms = 3e-6;
    f.eval_loss = 0;
    const Tolerances t = equivalence_tolerances(f, 100);
    const double roundings = 16 * 10.0 * std::ldexp(1.0, -24);
    QCOMPARE(t.params, 16e-6);
    QCOMPARE(t.losses, roundings);
    QCOMPARE(t.grad_norms, 48e-6);
    QCOMPARE(t.eval_loss, roundings);
  }

  void ceilingRefusesAnInconsistentFloor() {
    NoiseFloor f;
    f.params = 3.7e-5;
    QVERIFY(floor_is_consistent(f));
    f.grad_norms = 0.5;  // e.g. accumulation without its 1/A scale
    std::string why;
    QVERIFY(!floor_is_consistent(f, &why));
    QVERIFY2(why.find("gradient norms") != std::string::npos, why.c_str());
    f.grad_norms = std::numeric_limits<double>::quiet_NaN();
    QVERIFY(!floor_is_consistent(f));
  }

  void maxRelDiff() {
    const std::vector<float> b{1.0f, -4.0f, 2.0f};
    QCOMPARE(max_rel_diff(std::vector<float>{1.0f, -4.0f, 2.0f}, b), 0.0);
    QCOMPARE(max_rel_diff(std::vector<float>{1.5f, -4.0f, 2.0f}, b), 0.5 / 4.0);
    QVERIFY(std::isinf(max_rel_diff(std::vector<float>{1.0f, -4.0f}, b)));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    QVERIFY(std::isinf(max_rel_diff(std::vector<float>{1.0f, nan, 2.0f}, b)));
    // All-zero reference: the absolute difference.
    QCOMPARE(max_rel_diff(std::vector<double>{0.25, 0.0}, std::vector<double>{0.0, 0.0}), 0.25);
  }
};

QTEST_GUILESS_MAIN(TestEquivalence)
#include "tst_equivalence.moc"
