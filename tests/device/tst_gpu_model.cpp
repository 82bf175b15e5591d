// The engine's model on a GPU (the cuda device) against the same model on the CPU, through the
// checks `shardlab doctor` runs (engine/doctor/model_checks.h: loss, correct count and every
// gradient for the MLP with ReLU and GELU and a small GPT, accumulation, scaling and the parameter
// round trip), one data row per check; and the ledger counting the model's device buffers.
// Without a usable GPU the suite is skipped with the reason (ctest reports it as skipped).
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
#include "engine/device/device.h"
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

  std::unique_ptr<Device> gpu_;
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
    gpu_ = make_device(DeviceKind::cuda);
    qInfo("%s", gpu_->describe().c_str());
  }

  void cleanupTestCase() { gpu_.reset(); }

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
                               " accumulate", " scale"}) {
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

  void ledger_data() {
    QTest::addColumn<QString>("name");
    QTest::newRow("mlp-relu") << QStringLiteral("mlp-relu");
    QTest::newRow("gpt") << QStringLiteral("gpt");
  }

  // The engine's model on the GPU: num_params * 4 bytes under params and under grads, charged when
  // it is built and credited back when it goes.
  void ledger() {
    QFETCH(QString, name);
    const ModelConfig config = config_named(name);
    MemoryLedger ledger;
    {
      LedgerScope scope(&ledger);
      auto gpu = build_model(config, ModelStorage::owned, 1, gpu_.get());
      const int64_t bytes = gpu->num_params() * static_cast<int64_t>(sizeof(float));
      QCOMPARE(ledger.current(MemCategory::params), bytes);
      QCOMPARE(ledger.current(MemCategory::grads), bytes);
      (void)doctor::cpu_step(*gpu, doctor::check_batch(config, 1));
      QVERIFY(ledger.current(MemCategory::activations) > 0);
      QCOMPARE(ledger.current(MemCategory::params), bytes);
      QCOMPARE(ledger.current(MemCategory::grads), bytes);
    }
    QCOMPARE(ledger.current(MemCategory::params), int64_t{0});
    QCOMPARE(ledger.current(MemCategory::grads), int64_t{0});
  }
};

QTEST_APPLESS_MAIN(tst_GpuModel)
#include "tst_gpu_model.moc"
