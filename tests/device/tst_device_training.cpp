// Whole training runs on a GPU against the same jobs on the CPU, through the checks `shardlab
// doctor` runs (engine/doctor/training_checks.h): the MLP with every base optimizer, accumulation
// and clipping, and the GPT, each judged by the --verify rule against the CPU run (final
// parameters, every step's loss, the evaluations); ddp over NCCL on one GPU against the single-GPU
// run and, where two GPUs are usable, on every GPU against the CPU; the memory ledger counting
// device bytes exactly as the planner says. One data row per check. Also, here only: which jobs
// cuda refuses (none). Skipped without a usable GPU.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/core/device.h"
#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/run/device_training.h"
#include "engine/doctor/gpu_fixtures.h"
#include "engine/doctor/training_checks.h"
#include "engine/job/build.h"
#include "engine/job/job_spec.h"
#include "tests/common/doctor_rows.h"

using namespace shardlab;

class TestDeviceTraining : public QObject {
  Q_OBJECT

  doctor::CheckList checks_;

 private slots:
  void initTestCase() {
    checks_ = doctor::training_checks(0);
    QVERIFY(!checks_.empty());
    const QString skip = test::whole_group_skipped(checks_);
    if (skip.startsWith("no usable GPU")) QSKIP(qPrintable(skip));
    QVERIFY(device_training_built());
    const doctor::CheckList memory = doctor::memory_checks(0);
    checks_.insert(checks_.end(), memory.begin(), memory.end());
    for (const doctor::CheckResult& c : checks_) qInfo("%s", qPrintable(test::describe_check(c)));
  }

  // The doctor's training and memory checks: every one passes (a skip only for what needs two
  // GPUs), and each case is there.
  void doctorChecks_data() { test::add_check_rows(checks_); }
  void doctorChecks() {
    QFETCH(int, index);
    const doctor::CheckResult& c = checks_.at(static_cast<size_t>(index));
    if (c.status == doctor::CheckStatus::kSkip) {
      QVERIFY2(c.detail.rfind("needs two GPUs", 0) == 0, qPrintable(test::describe_check(c)));
      QSKIP(c.detail.c_str());
    }
    QVERIFY2(c.status == doctor::CheckStatus::kPass, qPrintable(test::describe_check(c)));
  }
  void doctorChecksCoverEveryCase() {
    for (const char* name :
         {"mlp adam: final parameters", "mlp sgd momentum nesterov: final parameters",
          "mlp adamw: final parameters", "mlp rmsprop momentum: final parameters",
          "mlp adagrad: final parameters", "mlp adam accumulation 2 clip 1.0: final parameters",
          "mlp adam accumulation 2 clip 1.0: every step's loss", "gpt adamw: final parameters",
          "gpt adamw: evaluation losses", "ddp over nccl on one GPU: final parameters",
          "params during training", "grads during training", "optimizer_state during training",
          "released after training"}) {
      const bool found = std::any_of(checks_.begin(), checks_.end(),
                                     [&](const doctor::CheckResult& c) { return c.name == name; });
      QVERIFY2(found, name);
    }
  }

  void jobProblems() {
    JobSpec job = doctor::mlp_check_job("/unused", "cuda");
    QCOMPARE(device_job_problem(job), std::string());
    job.parallel.strategy = "zero2";
    job.parallel.world_size = 2;
    job.train.checkpoint_dir = "/unused/ckpt";
    QCOMPARE(device_job_problem(job), std::string());  // every strategy, with checkpoints
    job.device = "cpu";
    QCOMPARE(device_job_problem(job), std::string());
  }
};

QTEST_GUILESS_MAIN(TestDeviceTraining)
#include "tst_device_training.moc"
