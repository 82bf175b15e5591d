// The example engine/examples/custom_model_fsdp (a user's own blocks and base optimizer wrapped in
// FSDPOptimizer / ZeRO2Optimizer, engine/run/seed_optimizers.h, on threads ranks) is run as a
// program, and what it prints and writes is compared with an independent reference: the same blocks
// and optimizer trained in this process by the engine's single-process Trainer, on the same data.
#include <QElapsedTimer>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <cstdio>

#include "engine/data/datasets.h"
#include "engine/examples/custom_model.h"
#include "engine/model/model.h"
#include "engine/model/model_file.h"
#include "engine/train/trainer.h"
#include "kernels/cpu/gemm.h"
#include "tests/parallel/parallel_test_util.h"

using namespace shardlab;
using namespace shardlab::ptest;

namespace {

// What the example is asked to run (its own settings are those of configuration() there).
constexpr int64_t kSteps = 12;
constexpr int64_t kBatch = 24;
constexpr int64_t kTrainLimit = 480;  // 20 batches: the steps stay within one epoch
constexpr uint64_t kModelSeed = 42;
constexpr uint64_t kDataSeed = 7;
constexpr double kLr = 0.05, kBeta = 0.9;

// Same parameters and losses up to float summation order: the ranks add a step's gradient in
// another order than one process (measured worst for these runs: ~1e-6 relative).
constexpr double kTolerance = 1e-4;

struct Printed {
  std::vector<double> losses;
  double eval_loss = NAN, eval_accuracy = NAN;
};

Printed parse(const QString& out) {
  Printed p;
  for (const QString& line : out.split('\n')) {
    long long step = 0;
    double a = 0, b = 0;
    const std::string l = line.toStdString();
    if (std::sscanf(l.c_str(), "step %lld loss %lf", &step, &a) == 2) p.losses.push_back(a);
    if (std::sscanf(l.c_str(), "eval loss %lf accuracy %lf", &a, &b) == 2) {
      p.eval_loss = a;
      p.eval_accuracy = b;
    }
  }
  return p;
}

}  // namespace

class TestCustomModelExample : public QObject {
  Q_OBJECT

  Datasets data_;
  TrainResult reference_;
  std::vector<float> initial_;
  QTemporaryDir tmp_;

 private slots:
  void initTestCase() {
    kernels::use_single_blas_thread();
    QVERIFY(tmp_.isValid());
    if (!have_fashion_mnist())
      QSKIP("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    DataConfig dc;
    dc.dataset = "fashion-mnist";
    dc.path = kFashionDir;
    dc.train_limit = kTrainLimit;
    dc.eval_limit = 1000;
    data_ = load_datasets(dc, 0);

    // The reference: one process, the Trainer, the same blocks, seed and optimizer settings.
    ModelConfig mc;
    mc.kind = "custom-classifier";
    mc.seed = kModelSeed;
    Model model(mc, example::classifier_blocks());
    model.init(kModelSeed);
    initial_.assign(model.params().begin(), model.params().end());
    example::HeavyBall optimizer(kLr, kBeta);
    TrainConfig tc;
    tc.steps = kSteps;
    tc.batch_size = kBatch;
    tc.seed = kDataSeed;
    tc.eval_batches = 2;
    Trainer trainer(model, optimizer, *data_.train, data_.eval.get(), tc, kLr);
    reference_ = trainer.run();
    QCOMPARE(static_cast<int64_t>(reference_.losses.size()), kSteps);
    // The comparison means something only if training moved far beyond the tolerance.
    QVERIFY2(rel_diff(reference_.params, initial_) > 100 * kTolerance,
             qPrintable(QString("training moved the parameters by only %1")
                            .arg(rel_diff(reference_.params, initial_))));
  }

  void matchesTrainer_data() {
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("ranks");
    QTest::addRow("fsdp/4") << "fsdp" << 4;
    QTest::addRow("fsdp/3") << "fsdp" << 3;
    QTest::addRow("zero2/4") << "zero2" << 4;
  }

  void matchesTrainer() {
    QFETCH(QString, strategy);
    QFETCH(int, ranks);
    const QString model_file = tmp_.filePath(strategy + QString::number(ranks) + ".slmodel");
    QProcess p;
    p.setProcessChannelMode(QProcess::SeparateChannels);
    p.start(CUSTOM_MODEL_FSDP,
            {"--strategy", strategy, "--ranks", QString::number(ranks), "--steps",
             QString::number(kSteps), "--batch", QString::number(kBatch), "--train-limit",
             QString::number(kTrainLimit), "--data", kFashionDir, "--out", model_file});
    QVERIFY(p.waitForFinished(120000));
    const QString out = QString::fromUtf8(p.readAllStandardOutput());
    const QString err = QString::fromUtf8(p.readAllStandardError());
    QVERIFY2(p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0, qPrintable(out + err));

    const Printed got = parse(out);
    QCOMPARE(static_cast<int64_t>(got.losses.size()), kSteps);
    for (size_t i = 0; i < got.losses.size(); ++i) {
      const double want = reference_.losses[i];
      QVERIFY2(std::fabs(got.losses[i] - want) <= kTolerance * std::fabs(want),
               qPrintable(QString("step %1: loss %2, the Trainer's %3")
                              .arg(i + 1)
                              .arg(got.losses[i], 0, 'g', 9)
                              .arg(want, 0, 'g', 9)));
    }
    const EvalResult& e = reference_.final_eval();
    QVERIFY2(std::fabs(got.eval_loss - e.loss) <= kTolerance * std::fabs(e.loss),
             qPrintable(QString("eval loss %1, the Trainer's %2").arg(got.eval_loss).arg(e.loss)));
    // An argmax may flip on a near tie: at most one sample of the evaluation.
    QVERIFY2(
        std::fabs(got.eval_accuracy - e.accuracy) <= 1.0 / static_cast<double>(e.samples) + 1e-6,
        qPrintable(
            QString("eval accuracy %1, the Trainer's %2").arg(got.eval_accuracy).arg(e.accuracy)));

    // The model file the example wrote holds the Trainer's parameters.
    ModelConfig mc;
    mc.kind = "custom-classifier";
    const Model layout_of(mc, example::classifier_blocks(), ModelStorage::external);
    const std::vector<float> params = read_model_file(model_file.toStdString(), layout_of.layout());
    const double d = rel_diff(params, reference_.params);
    QVERIFY2(d <= kTolerance, qPrintable(QString("final parameters differ by %1").arg(d)));
    qInfo("%s on %d ranks: parameters within %.2g of the Trainer's", qPrintable(strategy), ranks,
          d);
  }
};

QTEST_GUILESS_MAIN(TestCustomModelExample)
#include "tst_custom_model_example.moc"
