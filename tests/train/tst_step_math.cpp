// The shared step arithmetic (engine/train/step_math.h) against hand-computed values, and the
// Trainer's gradient accumulation and clipping against independent references: accumulating A
// micro-batches matches one full batch, and a clipped SGD step matches one computed by hand.
#include <QtTest>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/data/sampler.h"
#include "engine/job/build.h"
#include "engine/job/job_spec.h"
#include "engine/job/overrides.h"
#include "engine/model/cross_entropy.h"
#include "engine/train/step_math.h"
#include "engine/train/trainer.h"
#include "kernels/cpu/gemm.h"
#include "tests/common/data.h"

using namespace shardlab;
using shardlab::test::example_job;
using shardlab::test::have_fashion_mnist;
using shardlab::test::kNoFashionMnist;

namespace {

// A small single-process MLP job on 320 Fashion-MNIST images, batch 32, constant learning rate
// (the example job's own "parallel" section, if any, is dropped: the Trainer is one process).
JobSpec small_job(std::vector<std::string> overrides) {
  std::vector<std::string> all = {"model.mlp.hidden=[64]",        "data.train_limit=320",
                                  "data.eval_limit=32",           "train.steps=10",
                                  "train.batch_size=32",          "train.eval_every=0",
                                  "train.schedule.kind=constant", "train.schedule.warmup_steps=0",
                                  "train.schedule.min_lr_ratio=0"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  nlohmann::json doc = read_job_json(example_job("fashion_mlp.json"));
  doc.erase("parallel");
  for (const auto& o : all) apply_override(doc, o);
  return job_from_json(doc);
}

// max|a - b| / max|b|.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

struct Run {
  TrainResult result;
  std::vector<double> grad_norms;  // StepInfo::grad_norm of every step
  std::vector<float> initial;      // the parameters before training
};

// Trains `setup` without evaluation, logging every step.
Run train(TrainingSetup& setup) {
  Run run;
  run.initial.assign(setup.model->params().begin(), setup.model->params().end());
  TrainConfig config = setup.job.train;
  config.log_every = 1;
  Trainer trainer(*setup.model, *setup.optimizer, *setup.data.train, nullptr, config,
                  setup.job.optimizer.lr);
  TrainerCallbacks cb;
  cb.on_log = [&](const StepInfo& s) { run.grad_norms.push_back(s.grad_norm); };
  run.result = trainer.run(cb);
  return run;
}

std::vector<int64_t> iota(int64_t first, int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = first + i;
  return v;
}

}  // namespace

class TestStepMath : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { kernels::use_single_blas_thread(); }

  // ---- step_math ----

  void squaredNorm() {
    QCOMPARE(squared_norm({}), 0.0);
    const std::vector<float> v{3.0f, -4.0f};
    QCOMPARE(squared_norm(v), 25.0);
    // Squares in double: 1e20f squared overflows float but not double.
    const std::vector<float> big{1e20f, -1e20f};
    const double b = static_cast<double>(1e20f);
    QCOMPARE(squared_norm(big), b * b + b * b);
    const std::vector<float> tenth{0.1f};
    QCOMPARE(squared_norm(tenth), static_cast<double>(0.1f) * static_cast<double>(0.1f));
    // In index order: 2^54 + 1 rounds back to 2^54 three times; summed from the end the three
    // ones would make 3 first and give 2^54 + 4.
    const std::vector<float> ordered{134217728.0f, 1.0f, 1.0f, 1.0f};  // 2^27
    QCOMPARE(squared_norm(ordered), std::ldexp(1.0, 54));
    const std::vector<float> reversed{1.0f, 1.0f, 1.0f, 134217728.0f};
    QCOMPARE(squared_norm(reversed), std::ldexp(1.0, 54) + 4.0);
  }

  void clipCoefficient() {
    QCOMPARE(clip_coefficient(5.0, 1.0), 1.0 / (5.0 + 1e-6));
    QCOMPARE(clip_coefficient(250.0, 0.1), 0.1 / (250.0 + 1e-6));
    // torch's 1e-6 makes a norm exactly at the limit clip a hair.
    QCOMPARE(clip_coefficient(1.0, 1.0), 1.0 / (1.0 + 1e-6));
    QVERIFY(clip_coefficient(1.0, 1.0) < 1.0);
    // Below the limit: clamped to 1.
    QCOMPARE(clip_coefficient(0.5, 1.0), 1.0);
    QCOMPARE(clip_coefficient(0.0, 1.0), 1.0);
    QCOMPARE(clip_coefficient(1.0 - 1e-6, 1.0), 1.0);
    // max_norm <= 0: no clipping, whatever the norm.
    QCOMPARE(clip_coefficient(1e30, 0.0), 1.0);
    QCOMPARE(clip_coefficient(5.0, -1.0), 1.0);
  }

  void microBatch() {
    const std::vector<int64_t> idx = iota(10, 12);  // 10..21
    QCOMPARE(micro_batch(idx, 3, 0), (std::vector<int64_t>{10, 11, 12, 13}));
    QCOMPARE(micro_batch(idx, 3, 1), (std::vector<int64_t>{14, 15, 16, 17}));
    QCOMPARE(micro_batch(idx, 3, 2), (std::vector<int64_t>{18, 19, 20, 21}));
    QCOMPARE(micro_batch(idx, 1, 0), idx);
    QCOMPARE(micro_batch(idx, 12, 5), (std::vector<int64_t>{15}));
    QCOMPARE(micro_batch(idx, 2, 1), iota(16, 6));
    // Order is kept, not sorted.
    const std::vector<int64_t> shuffled{7, 3, 9, 1};
    QCOMPARE(micro_batch(shuffled, 2, 0), (std::vector<int64_t>{7, 3}));
    QCOMPARE(micro_batch(shuffled, 2, 1), (std::vector<int64_t>{9, 1}));
    // The micro-batches put back together are the batch.
    std::vector<int64_t> joined;
    for (int64_t m = 0; m < 4; ++m) {
      const auto part = micro_batch(idx, 4, m);
      QCOMPARE(part.size(), size_t(3));
      joined.insert(joined.end(), part.begin(), part.end());
    }
    QCOMPARE(joined, idx);
    QVERIFY(micro_batch({}, 2, 1).empty());

    QVERIFY_THROWS_EXCEPTION(InvalidArgument, micro_batch(idx, 5, 0));  // 12 % 5 != 0
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, micro_batch(idx, 0, 0));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, micro_batch(idx, 3, 3));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, micro_batch(idx, 3, -1));
  }

  // ---- Trainer ----

  // A micro-batches of B/A samples, each loss gradient scaled by 1/A, add up to the gradient of
  // the whole batch: after 10 steps the parameters match the A = 1 run.
  void accumulationMatchesTheFullBatch_data() {
    QTest::addColumn<QString>("optimizer");
    QTest::addColumn<int>("accumulation");
    QTest::addColumn<double>("clip");
    QTest::newRow("adam A=4") << "adam" << 4 << 0.0;
    // SGD, unlike Adam, is not invariant to the gradient's scale: a missing 1/A shows.
    QTest::newRow("sgd A=4") << "sgd" << 4 << 0.0;
    // Clipping sees the accumulated gradient, not a micro-batch's.
    QTest::newRow("sgd A=2 clipped") << "sgd" << 2 << 0.5;
  }

  void accumulationMatchesTheFullBatch() {
    if (!have_fashion_mnist()) QSKIP(kNoFashionMnist);
    QFETCH(QString, optimizer);
    QFETCH(int, accumulation);
    QFETCH(double, clip);
    std::vector<std::string> opt = {"train.clip_grad_norm=" + std::to_string(clip)};
    if (optimizer == "sgd") opt.insert(opt.end(), {"optimizer.name=sgd", "optimizer.lr=0.1"});

    TrainingSetup full = build_training(small_job(opt));
    opt.push_back("train.accumulation_steps=" + std::to_string(accumulation));
    TrainingSetup accumulated = build_training(small_job(opt));
    QCOMPARE(accumulated.job.train.accumulation_steps, int64_t(accumulation));

    const Run a = train(accumulated);
    const Run b = train(full);
    QCOMPARE(a.result.steps, int64_t(10));
    QCOMPARE(b.initial, a.initial);
    const double moved = relative_difference(b.result.params, b.initial);
    QVERIFY2(moved > 1e-3, qPrintable(QString("training barely moved: %1").arg(moved)));
    const double diff = relative_difference(a.result.params, b.result.params);
    qInfo("%s: parameters differ by %.3g relative (moved %.3g)", qPrintable(optimizer), diff,
          moved);
    QVERIFY2(diff <= 1e-5, qPrintable(QString("relative difference %1").arg(diff)));

    // The step's loss is the mean of the micro-batch losses: the full batch's mean.
    QCOMPARE(a.result.losses.size(), b.result.losses.size());
    QCOMPARE(a.grad_norms.size(), size_t(10));
    for (size_t i = 0; i < b.result.losses.size(); ++i) {
      QVERIFY2(std::abs(a.result.losses[i] - b.result.losses[i]) <= 1e-5 * b.result.losses[i],
               qPrintable(QString("step %1: loss %2 vs %3")
                              .arg(i + 1)
                              .arg(a.result.losses[i])
                              .arg(b.result.losses[i])));
      QVERIFY(std::abs(a.grad_norms[i] - b.grad_norms[i]) <= 1e-4 * b.grad_norms[i]);
    }
    if (clip > 0) QVERIFY2(b.grad_norms[0] > clip, "the clipped row does not clip");
  }

  // One clipped SGD step, computed here from the model's own forward and backward with a plain
  // norm loop and p -= lr * g * clip / (norm + 1e-6), matches the Trainer's.
  void clippingMatchesAHandComputedStep() {
    if (!have_fashion_mnist()) QSKIP(kNoFashionMnist);
    const double lr = 0.1, max_norm = 0.1;
    TrainingSetup setup = build_training(small_job(
        {"train.steps=1", "optimizer.name=sgd", "optimizer.lr=0.1", "train.clip_grad_norm=0.1"}));
    QCOMPARE(setup.job.train.clip_grad_norm, max_norm);
    QCOMPARE(setup.job.optimizer.momentum, 0.0);
    QCOMPARE(setup.job.optimizer.weight_decay, 0.0);

    // The reference: a second model with the same configuration and so the same initial values.
    std::unique_ptr<Model> ref = build_model(setup.job.model);
    const std::vector<float> initial(ref->params().begin(), ref->params().end());
    QCOMPARE(initial,
             std::vector<float>(setup.model->params().begin(), setup.model->params().end()));
    SamplerOptions sopt;
    sopt.batch_size = setup.job.train.batch_size;
    sopt.seed = setup.job.train.seed;
    Sampler sampler(setup.data.train->size(), sopt);
    Batch batch;
    setup.data.train->gather(sampler.next(), batch);
    QCOMPARE(batch.samples(), int64_t(32));
    ref->zero_grad();
    SoftmaxCrossEntropy loss_fn;
    const double loss = loss_fn.forward(ref->forward(batch.input), batch.targets);
    Tensor dlogits;
    loss_fn.backward(dlogits);
    ref->backward(dlogits);
    double sum = 0;
    for (const float g : ref->grads()) sum += static_cast<double>(g) * g;
    const double norm = std::sqrt(sum);
    QVERIFY2(norm > max_norm, qPrintable(QString("unclipped norm %1").arg(norm)));
    const double scale = max_norm / (norm + 1e-6);
    std::vector<float> expected(initial.size());
    double update_norm = 0;
    for (size_t i = 0; i < initial.size(); ++i) {
      const double step = lr * (static_cast<double>(ref->grads()[i]) * scale);
      expected[i] = static_cast<float>(initial[i] - step);
      update_norm += step * step;
    }
    // The clipped step has length lr * max_norm (less torch's 1e-6 in the denominator).
    QVERIFY(std::abs(std::sqrt(update_norm) - lr * max_norm * norm / (norm + 1e-6)) <= 1e-12);

    const Run run = train(setup);
    QCOMPARE(run.result.steps, int64_t(1));
    QCOMPARE(run.result.losses.front(), loss);
    QCOMPARE(run.grad_norms.size(), size_t(1));
    QVERIFY2(std::abs(run.grad_norms[0] - norm) <= 1e-9 * norm,
             qPrintable(QString("trainer norm %1, reference %2").arg(run.grad_norms[0]).arg(norm)));
    QVERIFY(run.grad_norms[0] > max_norm);  // the trainer's norm is the pre-clip one
    const double diff = relative_difference(run.result.params, expected);
    QVERIFY2(diff <= 1e-6, qPrintable(QString("relative difference %1").arg(diff)));
    // And the updates themselves agree (the parameters alone hide a small step in their size).
    std::vector<float> got_step(initial.size()), want_step(initial.size());
    for (size_t i = 0; i < initial.size(); ++i) {
      got_step[i] = run.result.params[i] - initial[i];
      want_step[i] = expected[i] - initial[i];
    }
    const double step_diff = relative_difference(got_step, want_step);
    QVERIFY2(step_diff <= 1e-3, qPrintable(QString("update differs by %1").arg(step_diff)));
  }

  // A limit the norm never reaches changes nothing, bit for bit, and neither does A = 1.
  void noClippingIsBitIdentical() {
    if (!have_fashion_mnist()) QSKIP(kNoFashionMnist);
    TrainingSetup plain = build_training(small_job({"train.steps=5"}));
    TrainingSetup loose = build_training(
        small_job({"train.steps=5", "train.clip_grad_norm=1e9", "train.accumulation_steps=1"}));
    const Run a = train(plain), b = train(loose);
    QCOMPARE(a.result.params, b.result.params);
    QCOMPARE(a.result.losses, b.result.losses);
    QCOMPARE(a.grad_norms, b.grad_norms);
    for (const double n : a.grad_norms) QVERIFY(n > 0 && n < 1e9);
  }

  void accumulationMustDivideTheBatch() {
    if (!have_fashion_mnist()) QSKIP(kNoFashionMnist);
    TrainingSetup setup = build_training(small_job({}));
    for (const int64_t bad : {int64_t(3), int64_t(0), int64_t(-2)}) {
      TrainConfig config = setup.job.train;
      config.accumulation_steps = bad;
      try {
        Trainer trainer(*setup.model, *setup.optimizer, *setup.data.train, nullptr, config, 0.1);
        QFAIL("accepted an accumulation that does not divide the batch");
      } catch (const InvalidArgument& e) {
        QVERIFY2(QString(e.what()).contains("train.accumulation_steps"), e.what());
      }
    }
  }
};

QTEST_GUILESS_MAIN(TestStepMath)
#include "tst_step_math.moc"
