// The doctor's checks of ranks sharing one device (engine/doctor/sharing_checks.h), which a GPU
// node runs with `shardlab doctor` and tests/gpu/device_check.sh, run here on the test device:
// ddp, zero1, zero2 and fsdp with 4 ranks, the GPT as tp 2 x dp 2 and pp 2 x dp 2, and a ZeRO-2
// checkpoint saved on the device resumed on the CPU, each judged against the CPU under the
// --verify rule. Every case is there and every check passes, so the stages a GPU will run are
// known to work on the engine's device path (staged collectives, device memory the host cannot
// touch); the cuda kernels themselves are what only a GPU adds.
#include <QtTest>

#include <algorithm>
#include <string>

#include "engine/doctor/sharing_checks.h"
#include "tests/common/doctor_rows.h"

using namespace shardlab;

class TstDeviceDoctor : public QObject {
  Q_OBJECT

  doctor::CheckList checks_;

 private slots:
  void initTestCase() {
    checks_ = doctor::shared_device_checks("test");
    for (const doctor::CheckResult& c : checks_) qInfo("%s", qPrintable(test::describe_check(c)));
  }

  void sharedDeviceChecks_data() { test::add_check_rows(checks_); }
  void sharedDeviceChecks() {
    QFETCH(int, index);
    const doctor::CheckResult& c = checks_.at(static_cast<size_t>(index));
    QCOMPARE(QString::fromStdString(c.group), QStringLiteral("training"));
    QVERIFY2(c.status == doctor::CheckStatus::kPass, qPrintable(test::describe_check(c)));
  }

  // 7 cases x 3 checks (parameters, every step's loss, evaluation losses).
  void everyCaseIsThere() {
    QCOMPARE(checks_.size(), size_t{21});
    for (const char* c :
         {"ddp with 4 ranks on test", "zero1 with 4 ranks on test", "zero2 with 4 ranks on test",
          "fsdp with 4 ranks on test", "gpt tp 2 x dp 2 on test", "gpt pp 2 x dp 2 on test",
          "zero2 checkpoint on test resumed on cpu"})
      for (const char* what :
           {": final parameters", ": every step's loss", ": evaluation losses"}) {
        const std::string name = std::string(c) + what;
        QVERIFY2(std::any_of(checks_.begin(), checks_.end(),
                             [&](const doctor::CheckResult& r) { return r.name == name; }),
                 name.c_str());
      }
  }
};

QTEST_APPLESS_MAIN(TstDeviceDoctor)
#include "tst_device_doctor.moc"
