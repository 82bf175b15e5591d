// GpuModel against the CPU Model it mirrors, through the checks `shardlab doctor` runs
// (engine/doctor/model_checks.h: loss, correct count and every gradient for the MLP with ReLU and
// GELU and a small GPT, accumulation, scaling and the parameter round trip), one data row per
// check. Also, here only: a bad token id or target throws InvalidArgument before any device work,
// and the ledger counts the parameter and gradient buffers. Without a usable GPU the suite is
// skipped with the reason (ctest reports it as skipped).
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/core/device.h"
#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/data/batch.h"
#include "engine/device/cuda_context.h"
#include "engine/device/gpu_model.h"
#include "engine/doctor/model_checks.h"
#include "engine/model/cross_entropy.h"
#include "engine/model/model.h"
#include "tests/common/doctor_rows.h"

using namespace shardlab;

namespace {

ModelConfig config_named(const QString& name) {
  if (name == "gpt") return doctor::check_gpt_config();
  return doctor::check_mlp_config(name == "mlp-gelu" ? "gelu" : "relu");
}

}  // namespace

class tst_GpuModel : public QObject {
  Q_OBJECT

  std::unique_ptr<CudaContext> ctx_;
  doctor::CheckList checks_;

 private slots:
  void initTestCase() {
    std::string why;
    if (usable_gpus(&why) == 0)
      QSKIP(qPrintable(QStringLiteral("no usable GPU: %1").arg(QString::fromStdString(why))));
    checks_ = doctor::gpu_model_checks(0);
    QVERIFY(!checks_.empty());
    const QString skip = test::whole_group_skipped(checks_);
    if (skip.startsWith("no usable GPU")) QSKIP(qPrintable(skip));
    for (const doctor::CheckResult& c : checks_) qInfo("%s", qPrintable(test::describe_check(c)));
    ctx_ = std::make_unique<CudaContext>(0);
    qInfo("%s", ctx_->describe().c_str());
  }

  void cleanupTestCase() { ctx_.reset(); }

  // The doctor's model checks: every one passes, and each kind is there.
  void doctorChecks_data() { test::add_check_rows(checks_); }
  void doctorChecks() {
    QFETCH(int, index);
    const doctor::CheckResult& c = checks_.at(static_cast<size_t>(index));
    QCOMPARE(QString::fromStdString(c.group), QStringLiteral("model"));
    QVERIFY2(c.status == doctor::CheckStatus::kPass, qPrintable(test::describe_check(c)));
  }
  void doctorChecksCoverEveryCase() {
    for (const char* model : {"mlp-relu", "mlp-gelu", "gpt T=16", "gpt T=11"})
      for (const char* what : {" loss", " correct", " gradients", " gradients per parameter",
                               " accumulate", " scale", " layout"}) {
        const std::string name = std::string(model) + what;
        const bool found =
            std::any_of(checks_.begin(), checks_.end(),
                        [&](const doctor::CheckResult& c) { return c.name == name; });
        QVERIFY2(found, name.c_str());
      }
    for (const char* name : {"gpt T=16 qkv key bias gradient", "mlp-relu parameter round trip",
                             "gpt T=16 parameter round trip"}) {
      const bool found = std::any_of(checks_.begin(), checks_.end(),
                                     [&](const doctor::CheckResult& c) { return c.name == name; });
      QVERIFY2(found, name);
    }
  }

  // A bad token id or target throws InvalidArgument with the CPU layers' message before any
  // device work (no activation buffer allocated, nothing uploaded); the model stays usable.
  void badInputThrowsFirst() {
    const ModelConfig config = doctor::check_gpt_config();
    auto cpu = build_model(config);
    MemoryLedger ledger;
    LedgerScope scope(&ledger);
    GpuModel gpu(config, cpu->params(), *ctx_);
    const Batch good = doctor::check_batch(config, 9);

    // (The host batches count under activations too; the device model must add nothing.)
    const auto expect_throw_on = [&](GpuModel& model, const Batch& b, const char* needle) {
      const int64_t before = ledger.current(MemCategory::activations);
      try {
        model.forward_loss(b);
        QFAIL("no exception");
      } catch (const InvalidArgument& e) {
        QVERIFY2(std::string(e.what()).find(needle) != std::string::npos, e.what());
      }
      QCOMPARE(ledger.current(MemCategory::activations), before);
    };
    const auto expect_throw = [&](const Batch& b, const char* needle) {
      expect_throw_on(gpu, b, needle);
    };
    Batch bad = good;
    bad.input[5] = 20.0f;  // == vocab
    expect_throw(bad, "Embedding: id 20 is not an integer in [0, 20)");
    bad = good;
    bad.input[0] = 2.5f;
    expect_throw(bad, "is not an integer in [0, 20)");
    bad = good;
    bad.targets[7] = 20;
    expect_throw(bad, "SoftmaxCrossEntropy: target 20 of row 7 is outside [0, 20)");
    bad = good;
    bad.targets.pop_back();
    expect_throw(bad, "SoftmaxCrossEntropy: 48 rows of logits but 47 targets");
    bad = good;
    bad.input.resize({2, 17});
    expect_throw(bad, "TokenPositionEmbedding: sequence length 17 exceeds context 16");
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, gpu.backward());  // no forward yet

    // MLP: a target outside the classes, a wrong feature count.
    const ModelConfig mc = doctor::check_mlp_config("relu");
    auto mcpu = build_model(mc);
    GpuModel mgpu(mc, mcpu->params(), *ctx_);
    Batch mb = doctor::check_batch(mc, 4);
    mb.targets[2] = -1;
    expect_throw_on(mgpu, mb, "SoftmaxCrossEntropy: target -1 of row 2 is outside [0, 5)");
    mb = doctor::check_batch(mc, 4);
    mb.input.resize({6, 13});
    expect_throw_on(mgpu, mb, "Linear: expected last dimension 12, got shape");

    // Still usable, and still the CPU's loss.
    const doctor::CpuStep want = doctor::cpu_step(*cpu, good);
    const float loss = gpu.forward_loss(good);
    QVERIFY(std::fabs(loss - want.loss) <= 1e-5 * std::fabs(want.loss));
    const Batch mgood = doctor::check_batch(mc, 4);
    const doctor::CpuStep mwant = doctor::cpu_step(*mcpu, mgood);
    const float mloss = mgpu.forward_loss(mgood);
    QVERIFY(std::fabs(mloss - mwant.loss) <= 1e-5 * std::fabs(mwant.loss));
  }

  void ledger_data() {
    QTest::addColumn<QString>("name");
    QTest::newRow("mlp-relu") << QStringLiteral("mlp-relu");
    QTest::newRow("gpt") << QStringLiteral("gpt");
  }

  // num_params * 4 bytes under params and under grads, charged at construction and credited
  // back at destruction.
  void ledger() {
    QFETCH(QString, name);
    const ModelConfig config = config_named(name);
    auto cpu = build_model(config);
    MemoryLedger ledger;
    {
      LedgerScope scope(&ledger);
      GpuModel gpu(config, cpu->params(), *ctx_);
      const int64_t bytes = cpu->num_params() * static_cast<int64_t>(sizeof(float));
      QCOMPARE(ledger.current(MemCategory::params), bytes);
      QCOMPARE(ledger.current(MemCategory::grads), bytes);
      gpu.forward_loss(doctor::check_batch(config, 1));
      gpu.backward();
      (void)gpu.download_grads();
      QVERIFY(ledger.current(MemCategory::activations) > 0);
      QCOMPARE(ledger.current(MemCategory::params), bytes);
      QCOMPARE(ledger.current(MemCategory::grads), bytes);
    }
    QCOMPARE(ledger.current(MemCategory::params), int64_t{0});
    QCOMPARE(ledger.current(MemCategory::grads), int64_t{0});
    QCOMPARE(ledger.current(MemCategory::activations), int64_t{0});
  }
};

QTEST_APPLESS_MAIN(tst_GpuModel)
#include "tst_gpu_model.moc"
