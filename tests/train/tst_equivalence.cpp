// The equivalence rule (engine/job/equivalence.h) on its own: which batch cuts set the noise
// floor for each kind of layout, the tolerance formula against the numbers written out here, the
// ceiling that refuses an inconsistent floor, max_rel_diff's edge cases (sizes, NaN, zeros), and
// the family measured on a real job.
// That the rule passes correct sharded runs and fails broken ones is shown by tests/parallel.
#include <QtTest>

#include <cmath>
#include <limits>

#include "engine/job/build.h"
#include "engine/job/equivalence.h"

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
    // 1-D: world x accumulation first, then the smallest other divisor of the batch (kCuts = 2).
    QCOMPARE(reordering_cuts(job_with("zero2", 4, 64, 1)), v({4, 2}));
    QCOMPARE(reordering_cuts(job_with("ddp", 2, 24, 3)), v({6, 2}));
    // 3-D: dp x micro-batches (accumulation is 1 there).
    QCOMPARE(reordering_cuts(job_with("zero1", 8, 16, 1, 2, 2, 2, 4)), v({8, 2}));
    // parallel.dp left at -1: world / (pp * tp).
    QCOMPARE(reordering_cuts(job_with("zero1", 8, 16, 1, 2, 2, -1, 4)), v({8, 2}));
    // The reference's own accumulation is no reordering: world 1 with accumulation 2.
    QCOMPARE(reordering_cuts(job_with("ddp", 1, 12, 2)), v({3, 4}));
    // Pure tp with one micro-batch cuts nothing itself: the divisors of the batch.
    QCOMPARE(reordering_cuts(job_with("ddp", 2, 6, 1, 1, 2, 1, 1)), v({2, 3}));
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
    f.grad_norms = std::numeric_limits<double>::infinity();
    QVERIFY(!floor_is_consistent(f));
  }

  // The whole family on a real job (the tiny character GPT, Adam, 5 steps, batch 12 as 2 ranks
  // would cut it): every reordered run trained the same model to rounding, none is bit-identical
  // to the reference under every kernel (the reversed batch sees to that), and the floor is
  // consistent and small.
  void floorOfARealJob() {
    JobSpec j;
    j.name = "floor";
    j.model.kind = "gpt";
    j.model.seed = 5;
    j.model.gpt.context = 8;
    j.model.gpt.width = 16;
    j.model.gpt.layers = 2;
    j.model.gpt.heads = 2;
    j.data.dataset = "chars";
    j.data.train_limit = 600;
    j.data.eval_limit = 300;
    j.optimizer.name = "adam";
    j.optimizer.lr = 3e-3;
    j.train.steps = 5;
    j.train.batch_size = 12;
    j.train.eval_batches = 1;
    j.parallel.strategy = "ddp";
    j.parallel.world_size = 2;
    const SingleRunner runner = [](TrainingSetup& s, const TrainerCallbacks& cb) {
      return run_training(s, cb);
    };
    const RunFigures ref = run_figures(single_process_job(j), runner);
    QCOMPARE(ref.result.steps, int64_t{5});
    QCOMPARE(ref.grad_norms.size(), size_t{5});
    const RunFigures rev = run_figures(single_process_job(j), runner, /*reversed=*/true);
    QVERIFY2(rev.result.params != ref.result.params, "reversing the batch changed no bit");
    const NoiseFloor f = measure_noise_floor(j, ref, runner);
    QCOMPARE(f.cuts, v({2, 3}));
    QVERIFY(f.reversed);
    QVERIFY2(f.params > 0 && f.params >= max_rel_diff(rev.result.params, ref.result.params),
             qPrintable(QString("floor %1").arg(f.params)));
    std::string why;
    QVERIFY2(floor_is_consistent(f, &why), why.c_str());
    QVERIFY2(training_movement(ref) > kMinMovement * equivalence_tolerance(f.params, 5),
             qPrintable(QString("moved %1").arg(training_movement(ref))));
    qInfo("floor: params %.3g, losses %.3g, grad norms %.3g, eval loss %.3g; %s", f.params,
          f.losses, f.grad_norms, f.eval_loss, describe(f).c_str());
  }

  void maxRelDiff() {
    const std::vector<float> b{1.0f, -4.0f, 2.0f};
    QCOMPARE(max_rel_diff(std::vector<float>{1.0f, -4.0f, 2.0f}, b), 0.0);
    QCOMPARE(max_rel_diff(std::vector<float>{1.5f, -4.0f, 2.0f}, b), 0.5 / 4.0);
    QVERIFY(std::isinf(max_rel_diff(std::vector<float>{1.0f, -4.0f}, b)));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    QVERIFY(std::isinf(max_rel_diff(std::vector<float>{1.0f, nan, 2.0f}, b)));
    // An infinite reference element: inf / inf is not "close".
    const float inf = std::numeric_limits<float>::infinity();
    QVERIFY(std::isinf(max_rel_diff(std::vector<float>{1.0f, inf}, std::vector<float>{1.0f, inf})));
    // All-zero reference: the absolute difference.
    QCOMPARE(max_rel_diff(std::vector<double>{0.25, 0.0}, std::vector<double>{0.0, 0.0}), 0.25);
  }
};

QTEST_GUILESS_MAIN(TestEquivalence)
#include "tst_equivalence.moc"
