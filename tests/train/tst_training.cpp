// End-to-end single-process training on real data through the same path `shardlab run` uses:
// job file -> build_training -> Trainer.
#include <QtTest>

#include <filesystem>

#include "engine/core/error.h"
#include "engine/job/build.h"
#include "engine/job/job_spec.h"
#include "kernels/cpu/gemm.h"
#include "tests/common/data.h"

using namespace shardlab;
using shardlab::test::example_job;
using shardlab::test::have_fashion_mnist;
using shardlab::test::kNoFashionMnist;

namespace {}  // namespace

class TestTraining : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { kernels::use_single_blas_thread(); }

  // The demo job's model reaches >= 85% test accuracy on all 10,000 Fashion-MNIST test images
  // within a bounded number of steps.
  void mlpReaches85PercentOnFashionMnist() {
    if (!have_fashion_mnist()) QSKIP(kNoFashionMnist);
    JobSpec job =
        load_job(example_job("fashion_mlp.json"), {"train.steps=3000", "train.eval_every=0"});
    TrainingSetup setup = build_training(job);
    const TrainResult r = run_training(setup);
    QCOMPARE(r.steps, int64_t(3000));
    QCOMPARE(r.final_eval().samples, int64_t(10000));
    qInfo("MLP: test accuracy %.2f%% after %lld steps, %.0f samples/s",
          100.0 * r.final_eval().accuracy, static_cast<long long>(r.steps), r.samples_per_second);
    QVERIFY2(r.final_eval().accuracy >= 0.85,
             qPrintable(QString("accuracy %1").arg(r.final_eval().accuracy)));
    // Training loss fell: the last 100 steps average far below the first 10.
    double first = 0, last = 0;
    for (int i = 0; i < 10; ++i) first += r.losses[i] / 10;
    for (size_t i = r.losses.size() - 100; i < r.losses.size(); ++i) last += r.losses[i] / 100;
    QVERIFY(last < 0.5 * first);
    QCOMPARE(r.params.size(), size_t(setup.model->num_params()));
  }

  // The character model's held-out loss falls below 2.5 nats per character (a unigram model of
  // English text sits near 3.3; the untrained model near ln(vocab) ~ 4.5).
  void charModelLossFalls() {
    // The example job as shipped (400 steps), evaluated on 1,024 held-out windows.
    JobSpec job =
        load_job(example_job("chars_gpt.json"), {"train.eval_every=0", "train.eval_batches=4"});
    TrainingSetup setup = build_training(job);
    Trainer trainer(*setup.model, *setup.optimizer, *setup.data.train, setup.data.eval.get(),
                    setup.job.train, setup.job.optimizer.lr);
    const EvalResult before = trainer.evaluate(*setup.data.eval, 1024);
    const TrainResult r = trainer.run();
    qInfo("GPT chars: eval loss %.3f -> %.3f after %lld steps, %.0f tokens/s", before.loss,
          r.final_eval().loss, static_cast<long long>(r.steps), r.tokens_per_second);
    QVERIFY(before.loss > 3.5);
    QVERIFY2(r.final_eval().loss < 2.5, qPrintable(QString::number(r.final_eval().loss)));
  }

  // Same job, same seeds: bit-identical loss history and parameters.
  void trainingIsDeterministic() {
    const std::vector<std::string> small = {"train.steps=20", "train.eval_every=0",
                                            "train.eval_batches=1", "model.gpt.layers=1"};
    JobSpec job = load_job(example_job("chars_gpt.json"), small);
    TrainingSetup a = build_training(job), b = build_training(job);
    const TrainResult ra = run_training(a), rb = run_training(b);
    QCOMPARE(ra.losses, rb.losses);
    QCOMPARE(ra.params, rb.params);
    // A different data seed changes the order and so the history.
    JobSpec other = job;
    other.train.seed = job.train.seed + 1;
    TrainingSetup c = build_training(other);
    QVERIFY(run_training(c).losses != ra.losses);
  }

  // With a learning rate far too low the eval loss gets no better, and patience 2 stops the run
  // after the third evaluation instead of running all steps.
  void earlyStoppingStopsARunThatDoesNotImprove() {
    JobSpec job =
        load_job(example_job("chars_gpt.json"),
                 {"train.steps=200", "train.eval_every=5", "train.eval_batches=1",
                  "model.gpt.layers=1", "optimizer.lr=0.0000001", "train.early_stopping.patience=2",
                  "train.early_stopping.min_delta=0.5"});
    TrainingSetup setup = build_training(job);
    const TrainResult r = run_training(setup);
    QVERIFY(r.stopped_early);
    QCOMPARE(r.steps, int64_t(15));
    QCOMPARE(r.evals.size(), size_t(3));
    QVERIFY(QString::fromStdString(r.stop_reason).contains("early stop"));
  }

  // train.epochs sets the run length when train.steps is 0: 320 windows in batches of 32 are
  // 10 steps an epoch, so 2 epochs are 20 steps.
  void epochsSetTheRunLength() {
    JobSpec job = load_job(example_job("chars_gpt.json"),
                           {"train.steps=0", "train.epochs=2", "data.train_limit=320",
                            "train.eval_every=0", "train.eval_batches=1", "model.gpt.layers=1"});
    TrainingSetup setup = build_training(job);
    int64_t last_epoch = -1;
    TrainerCallbacks cb;
    cb.on_log = [&](const StepInfo& s) { last_epoch = s.epoch; };
    const TrainResult r = run_training(setup, cb);
    QCOMPARE(r.steps, int64_t(20));
    QCOMPARE(last_epoch, int64_t(1));  // epochs count from 0
  }

  void divergenceIsReportedNotHidden() {
    JobSpec job = load_job(
        example_job("chars_gpt.json"),
        {"train.steps=50", "model.gpt.layers=1", "optimizer.name=sgd", "optimizer.lr=1e30"});
    TrainingSetup setup = build_training(job);
    try {
      run_training(setup);
      QFAIL("a learning rate of 1e30 trained without complaint");
    } catch (const InvalidArgument& e) {
      QVERIFY2(QString(e.what()).contains("training diverged"), e.what());
    }
  }
};

QTEST_GUILESS_MAIN(TestTraining)
#include "tst_training.moc"
