// train.threads and the cores a run computes on (engine/launch/compute_threads.h): the automatic
// share per strategy and backend, the job field, and what the default of 1 guards: on more BLAS
// threads OpenBLAS sums some GEMMs in another order, so the bits differ from a 1-thread run (this
// test found it), while a given thread count gives the same bits on every run. Both the MLP
// (Fashion-MNIST, batch 256, GEMMs large enough that OpenBLAS does split them) and the GPT.
#include <QtTest>

#include <cstdlib>
#include <cstring>

#include "engine/core/error.h"
#include "engine/job/build.h"
#include "engine/job/job_spec.h"
#include "engine/launch/compute_threads.h"
#include "kernels/cpu/gemm.h"
#include "tests/common/data.h"

using namespace shardlab;
using shardlab::test::example_job;
using shardlab::test::have_fashion_mnist;
using shardlab::test::kNoFashionMnist;

namespace {

TrainResult train_on(const std::string& job_file, std::vector<std::string> sets, int threads) {
  kernels::set_blas_threads(threads);
  JobSpec job = load_job(example_job(job_file), sets);
  TrainingSetup setup = build_training(job);
  TrainResult r = run_training(setup);
  kernels::use_single_blas_thread();
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

class TestComputeThreads : public QObject {
  Q_OBJECT
 private slots:
  void automaticShare() {
    const int cores = launch::usable_cores();
    QVERIFY(cores >= 1);
    JobSpec job;
    QCOMPARE(job.train.threads, int64_t{1});  // the default: one thread, machine-independent bits
    QCOMPARE(launch::compute_threads(job, 1), 1);
    job.train.threads = 0;  // automatic
    job.parallel.strategy = "none";
    job.parallel.world_size = 1;
    QCOMPARE(launch::ranks_on_this_node(job), 1);
    QCOMPARE(launch::compute_threads(job, 1), cores);
    job.parallel.strategy = "zero2";
    job.parallel.world_size = 4;
    job.parallel.backend = "threads";
    QCOMPARE(launch::ranks_on_this_node(job), 4);
    QCOMPARE(launch::compute_threads(job, 4), std::max(1, cores / 4));
    job.parallel.backend = "mpi";
    qputenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
    QCOMPARE(launch::ranks_on_this_node(job), 2);
    qunsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    QCOMPARE(launch::ranks_on_this_node(job), 1);
    job.train.threads = 3;  // a count
    QCOMPARE(launch::compute_threads(job, 4), 3);
    QCOMPARE(launch::use_compute_threads(job), 3);
    QCOMPARE(kernels::blas_threads(), 3);
    kernels::use_single_blas_thread();
  }

  void fieldIsValidated() {
    JobSpec job = load_job(example_job("fashion_mlp.json"), {"train.threads=2"});
    QCOMPARE(job.train.threads, int64_t{2});
    try {
      load_job(example_job("fashion_mlp.json"), {"train.threads=-1"});
      QFAIL("train.threads=-1 was accepted");
    } catch (const InvalidArgument& e) {
      QVERIFY2(std::strstr(e.what(), "train.threads") != nullptr, e.what());
    }
  }

  void sameBitsOnEveryRun_data() {
    QTest::addColumn<QString>("job");
    QTest::addColumn<QStringList>("sets");
    QTest::newRow("mlp 784-512-256-10, batch 256")
        << "fashion_mlp.json"
        << QStringList{
               "parallel.strategy=none", "parallel.world_size=1", "model.mlp.hidden=[512,256]",
               "train.batch_size=256",   "train.steps=20",        "train.eval_every=0",
               "train.eval_batches=1"};
    QTest::newRow("gpt chars") << "chars_gpt.json"
                               << QStringList{"train.steps=10", "train.eval_every=0",
                                              "train.eval_batches=1"};
  }
  void sameBitsOnEveryRun() {
    QFETCH(QString, job);
    QFETCH(QStringList, sets);
    if (job.startsWith("fashion") && !have_fashion_mnist()) QSKIP(kNoFashionMnist);
    std::vector<std::string> s;
    for (const QString& x : sets) s.push_back(x.toStdString());
    // Same bits on every run with the same thread count, 1 or several.
    for (int threads : {1, 4}) {
      const TrainResult a = train_on(job.toStdString(), s, threads);
      const TrainResult b = train_on(job.toStdString(), s, threads);
      QVERIFY(!a.params.empty());
      QVERIFY2(same_bits(a.params, b.params),
               qPrintable(QString("two runs on %1 threads differ").arg(threads)));
      QCOMPARE(a.losses.size(), b.losses.size());
      for (size_t i = 0; i < a.losses.size(); ++i)
        QVERIFY2(
            std::memcmp(&a.losses[i], &b.losses[i], sizeof(double)) == 0,
            qPrintable(QString("loss of step %1 differs on %2 threads").arg(i + 1).arg(threads)));
    }
  }
};

QTEST_GUILESS_MAIN(TestComputeThreads)
#include "tst_compute_threads.moc"
