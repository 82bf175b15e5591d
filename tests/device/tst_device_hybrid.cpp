// One engine on every device, for 3D parallelism: the GPT as pp x tp x dp with its ranks as
// threads, each on a test device of its own (memory the host cannot touch, kernels on the device's
// stream thread), trains exactly as the same job on the cpu device: every step's loss, the final
// evaluation and the gathered parameters bit for bit, and each rank's ledger (parameters,
// gradients, optimizer state). The layers run their kernels on the device (vocabulary-parallel
// embedding and cross-entropy, column- and row-parallel linears), the tp all-reduces and the
// pipeline's sends and receives are staged through the host, the dp strategies reduce and gather
// on device memory. The cpu run is the reference (tst_hybrid_equivalence checks it against one
// process). Checkpoints of a 3D run cross devices and layouts.
#include <QTemporaryDir>
#include <QtTest/QtTest>

#include <cstring>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint_store.h"
#include "engine/run/device_training.h"
#include "engine/job/build.h"
#include "engine/job/job_spec.h"
#include "engine/run/rank_runner.h"
#include "tests/common/data.h"

using namespace shardlab;
using shardlab::test::example_job;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The example 3D job (the GPT with 2 layers, 4 heads) cut to a few small steps.
JobSpec job_3d(int pp, int tp, int dp, const std::string& schedule, const std::string& strategy,
               int64_t micro_batches, const std::string& optimizer, double clip,
               int64_t chunks = 1) {
  std::vector<std::string> o = {
      "train.steps=4",        "train.eval_every=2", "train.eval_batches=1",   "train.log_every=100",
      "model.gpt.context=16", "model.gpt.width=32", "parallel.bucket_mb=0.01"};
  o.push_back("parallel.pp=" + std::to_string(pp));
  o.push_back("parallel.tp=" + std::to_string(tp));
  o.push_back("parallel.dp=" + std::to_string(dp));
  o.push_back("parallel.world_size=" + std::to_string(pp * tp * dp));
  o.push_back("parallel.schedule=" + schedule);
  o.push_back("parallel.pp_chunks=" + std::to_string(chunks));
  o.push_back("parallel.strategy=" + strategy);
  o.push_back("parallel.micro_batches=" + std::to_string(micro_batches));
  o.push_back("train.batch_size=" + std::to_string(2 * dp * micro_batches));
  o.push_back("optimizer.name=" + optimizer);
  if (optimizer == "sgd") o.push_back("optimizer.momentum=0.9");
  o.push_back("train.clip_grad_norm=" + std::to_string(clip));
  return load_job(example_job("gpt-3d.json"), o);
}

ParallelRunResult run_on(JobSpec job, const std::string& device, const RankRunOptions& o = {}) {
  job.device = device;
  const Datasets data = load_completed_data(job);
  return run_threads_job(job, data, o);
}

}  // namespace

class TstDeviceHybrid : public QObject {
  Q_OBJECT

 private slots:
  void hybridOnTestDevicesEqualsCpu_data() {
    QTest::addColumn<int>("pp");
    QTest::addColumn<int>("tp");
    QTest::addColumn<int>("dp");
    QTest::addColumn<QString>("schedule");
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("micro");
    QTest::addColumn<QString>("optimizer");
    QTest::addColumn<double>("clip");
    QTest::addColumn<int>("chunks");
    // Every dimension at once under each data-parallel strategy, with a clip that binds (the
    // global norm counts every element once: tp-replicated ranges skipped, dp shards); tensor
    // parallelism alone over 4 ranks; a pipeline alone under GPipe; interleaved 1F1B.
    for (const char* s : {"ddp", "zero1", "zero2"})
      QTest::addRow("pp2 tp2 dp2 1f1b %s sgd clip", s)
          << 2 << 2 << 2 << "1f1b" << QString(s) << 2 << "sgd" << 0.05 << 1;
    QTest::addRow("pp1 tp4 dp1 ddp adamw") << 1 << 4 << 1 << "1f1b"
                                           << "ddp" << 2 << "adamw" << 0.0 << 1;
    QTest::addRow("pp4 tp1 dp1 gpipe zero1 adam") << 4 << 1 << 1 << "gpipe"
                                                  << "zero1" << 4 << "adam" << 0.0 << 1;
    QTest::addRow("pp2 tp1 dp2 interleaved zero2 adamw") << 2 << 1 << 2 << "interleaved"
                                                         << "zero2" << 4 << "adamw" << 0.0 << 2;
  }

  void hybridOnTestDevicesEqualsCpu() {
    QFETCH(int, pp);
    QFETCH(int, tp);
    QFETCH(int, dp);
    QFETCH(QString, schedule);
    QFETCH(QString, strategy);
    QFETCH(int, micro);
    QFETCH(QString, optimizer);
    QFETCH(double, clip);
    QFETCH(int, chunks);
    const JobSpec job = job_3d(pp, tp, dp, schedule.toStdString(), strategy.toStdString(), micro,
                               optimizer.toStdString(), clip, chunks);
    QCOMPARE(QString::fromStdString(device_job_problem([&] {
               JobSpec j = job;
               j.device = "test";
               return j;
             }())),
             QString());
    const ParallelRunResult cpu = run_on(job, "cpu");
    const ParallelRunResult dev = run_on(job, "test");
    QCOMPARE(cpu.result.steps, int64_t{4});
    QCOMPARE(dev.result.losses, cpu.result.losses);
    QVERIFY2(same_bits(dev.result.params, cpu.result.params),
             "the test devices' parameters differ from the cpu run's");
    QCOMPARE(dev.result.evals.size(), cpu.result.evals.size());
    QVERIFY(!cpu.result.evals.empty());
    for (size_t i = 0; i < cpu.result.evals.size(); ++i) {
      QCOMPARE(dev.result.evals[i].loss, cpu.result.evals[i].loss);
      QCOMPARE(dev.result.evals[i].accuracy, cpu.result.evals[i].accuracy);
    }
    QCOMPARE(dev.ranks.size(), cpu.ranks.size());
    for (size_t r = 0; r < cpu.ranks.size(); ++r)
      for (const MemCategory c :
           {MemCategory::params, MemCategory::grads, MemCategory::optimizer_state}) {
        QCOMPARE(dev.ranks[r].memory.current[c], cpu.ranks[r].memory.current[c]);
        QCOMPARE(dev.ranks[r].memory.peak[c], cpu.ranks[r].memory.peak[c]);
      }
  }

  // A 3D run's checkpoint crosses devices and layouts: pp2 x tp2 x dp2 with ZeRO-1 on test devices
  // saves at step 2; resumed on cpu in the same layout it ends at the test run bit for bit
  // (test -> cpu); a cpu run's checkpoint resumed on test devices as pp1 x tp2 x dp2 with ZeRO-2
  // (resharded over stages and strategies) takes the same steps as resharding on cpu does.
  void checkpointsOf3dCrossDevices() {
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    JobSpec job = job_3d(2, 2, 2, "1f1b", "zero1", 2, "adamw", 0.0);
    job.train.checkpoint_every = 2;
    auto run = [&](JobSpec j, const std::string& device, const std::string& dir,
                   const std::string& resume) {
      j.train.checkpoint_dir = tmp.filePath(QString::fromStdString(dir)).toStdString();
      RankRunOptions o;
      o.resume_from = resume;
      return run_on(j, device, o);
    };
    const ParallelRunResult a = run(job, "test", "a", "");
    QCOMPARE(a.result.steps, int64_t{4});
    const std::string a2 = step_dir(tmp.filePath("a").toStdString(), 2);
    const ParallelRunResult b = run(job, "cpu", "b", a2);
    QCOMPARE(b.result.losses.size(), size_t{2});
    QVERIFY2(same_bits(b.result.params, a.result.params), "3D test -> cpu resume differs");

    JobSpec other = job_3d(1, 2, 2, "1f1b", "zero2", 2, "adamw", 0.0);
    other.train.checkpoint_every = 2;
    const ParallelRunResult on_cpu = run(other, "cpu", "c", a2);
    const ParallelRunResult on_test = run(other, "test", "d", a2);
    QCOMPARE(on_test.result.losses.size(), size_t{2});
    QCOMPARE(on_test.result.losses, on_cpu.result.losses);
    QVERIFY2(same_bits(on_test.result.params, on_cpu.result.params),
             "a resharded resume on test devices differs from the same on cpu");
  }
};

QTEST_APPLESS_MAIN(TstDeviceHybrid)
#include "tst_device_hybrid.moc"
