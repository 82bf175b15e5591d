// What `shardlab doctor`'s GPU checks train on, checked where there is no GPU: the synthetic set
// (engine/doctor/gpu_fixtures.h) is read by the real Fashion-MNIST loader with the counts, shapes
// and label range it was made with, is the same on every construction (a fixed seed), is removed
// with its owner, and is learnt: the check job trained on the CPU ends well above chance. The
// check jobs validate, and the GPT job reads the built-in corpus.
#include <QtTest>

#include <filesystem>
#include <set>

#include "engine/data/datasets.h"
#include "engine/doctor/gpu_fixtures.h"
#include "engine/job/build.h"
#include "engine/job/job_spec.h"

using namespace shardlab;

class TestDoctorFixtures : public QObject {
  Q_OBJECT

 private slots:
  void syntheticSetReadsBack() {
    std::string dir;
    {
      const doctor::SyntheticImages images(300, 100);
      dir = images.dir();
      DataConfig c;
      c.dataset = "fashion-mnist";
      c.path = dir;
      const Datasets d = load_datasets(c, 0);
      QCOMPARE(d.train->size(), int64_t{300});
      QCOMPARE(d.eval->size(), int64_t{100});
      Batch b;
      std::vector<int64_t> all(300);
      for (int64_t i = 0; i < 300; ++i) all[static_cast<size_t>(i)] = i;
      d.train->gather(all, b);
      QCOMPARE(b.input.shape(), (std::vector<int64_t>{300, 784}));
      std::set<int32_t> labels(b.targets.begin(), b.targets.end());
      QCOMPARE(static_cast<int>(labels.size()), 10);  // 300 draws of 10 classes
      QVERIFY(*labels.begin() >= 0 && *labels.rbegin() <= 9);

      // The same bytes from a second set (a fixed seed).
      const doctor::SyntheticImages again(300, 100);
      QVERIFY(again.dir() != dir);
      c.path = again.dir();
      const Datasets d2 = load_datasets(c, 0);
      Batch b2;
      d2.train->gather(all, b2);
      QVERIFY(b2.targets == b.targets);
      bool same = true;
      for (int64_t i = 0; i < b.input.numel(); ++i) same = same && b.input[i] == b2.input[i];
      QVERIFY(same);
    }
    QVERIFY2(!std::filesystem::exists(dir), dir.c_str());
  }

  // The MLP check job learns the set on the CPU: after its 10 steps the final evaluation is well
  // above the 10% of chance (0.54 here). The bound, 0.25, is over ten standard deviations of a
  // 512-sample evaluation (sqrt(0.1 x 0.9 / 512) = 1.3%) above chance, where a set whose labels
  // did not follow its pixels would stay.
  void mlpJobLearnsIt() {
    const doctor::SyntheticImages images;
    JobSpec job = doctor::mlp_check_job(images.dir());
    QCOMPARE(job.device, std::string("cpu"));
    TrainingSetup s = build_training(job);
    const TrainResult r = run_training(s);
    QCOMPARE(r.steps, int64_t{10});
    QVERIFY(!r.evals.empty());
    qInfo("accuracy after 10 steps: %.3f, losses %.4f -> %.4f", r.final_eval().accuracy,
          r.losses.front(), r.losses.back());
    QVERIFY2(r.final_eval().accuracy > 0.25, "the synthetic set is not learnt");
    QVERIFY(r.losses.back() < r.losses.front());
  }

  void gptJobReadsTheBuiltInCorpus() {
    JobSpec job = doctor::gpt_check_job();
    TrainingSetup s = build_training(job);
    QVERIFY2(s.data.description.find("corpus") != std::string::npos, s.data.description.c_str());
    QVERIFY(s.job.model.gpt.vocab_size > 10);
    QCOMPARE(s.job.train.steps, int64_t{10});
  }
};

QTEST_GUILESS_MAIN(TestDoctorFixtures)
#include "tst_doctor_fixtures.moc"
