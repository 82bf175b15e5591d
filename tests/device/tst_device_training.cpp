// Whole training runs on a GPU against the same jobs on the CPU (build_training + run_training,
// never the code under test): every step's loss and the final parameters within 1e-4 relative
// (max |a - b| / max |b|), the evaluations close, for the MLP and the GPT model and every base
// optimizer; ddp over NCCL against one GPU (world 1) and, where two GPUs are usable, two ranks
// against the CPU; the memory ledger counting device bytes. Skipped without a usable GPU.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/core/device.h"
#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/device/cuda_context.h"
#include "engine/device/device_training.h"
#include "engine/device/gpu_optimizer.h"
#include "engine/job/build.h"
#include "engine/job/job_spec.h"

namespace shardlab {
namespace {

constexpr double kTol = 1e-4;

std::string source_path(const char* rel) {
  return std::string(SHARDLAB_SOURCE_DIR) + "/" + rel;
}

// fashion_mlp.json shrunk: one process, hidden 32-16, batch 32, 10 steps, evaluations at 5 and 10
// over 512 samples.
JobSpec mlp_job() {
  return load_job(source_path("resources/jobs/fashion_mlp.json"),
                  {"parallel={}", "model.mlp.hidden=[32,16]", "train.batch_size=32",
                   "train.steps=10", "train.log_every=5", "train.eval_every=5",
                   "train.eval_batches=2", "data.train_limit=4096", "data.eval_limit=1024"});
}

// chars_gpt.json shrunk: context 16, width 32, 1 layer, 2 heads, batch 8, 10 steps.
JobSpec gpt_job() {
  return load_job(source_path("resources/jobs/chars_gpt.json"),
                  {"model.gpt.context=16", "model.gpt.width=32", "model.gpt.layers=1",
                   "model.gpt.heads=2", "train.batch_size=8", "train.steps=10", "train.log_every=5",
                   "train.eval_every=5", "train.eval_batches=1"});
}

// Qt Test reports an exception escaping a test function and then terminates the whole suite; a
// device or NCCL failure in one case must fail that case only. Runs f; an exception becomes a
// failure of the current test (whose function then returns normally).
template <class F>
void guard(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    QTest::qFail(e.what(), __FILE__, __LINE__);
  }
}

TrainResult cpu_run(JobSpec job) {
  job.device = "cpu";
  TrainingSetup s = build_training(job);
  return run_training(s);
}

// The job on the GPU; a failure fails the current test and gives an empty result (which no
// comparison accepts).
TrainResult gpu_run(JobSpec job, const TrainerCallbacks& callbacks = {}) {
  job.device = "cuda";
  TrainResult r;
  guard([&] {
    TrainingSetup s = build_training(job);
    r = run_device_training(s, callbacks);
  });
  return r;
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

bool close(double a, double b, double tol) {
  return std::fabs(a - b) <= tol * std::max(1e-12, std::fabs(b));
}

// `got` (a device run) against `want` (the reference run).
void compare(const TrainResult& got, const TrainResult& want, double tol = kTol) {
  if (QTest::currentTestFailed()) return;  // a run failed (guard): already reported
  QCOMPARE(got.steps, want.steps);
  QCOMPARE(got.losses.size(), want.losses.size());
  for (size_t i = 0; i < want.losses.size(); ++i)
    QVERIFY2(close(got.losses[i], want.losses[i], tol),
             qPrintable(QString("step %1: loss %2, reference %3")
                            .arg(i + 1)
                            .arg(got.losses[i], 0, 'g', 10)
                            .arg(want.losses[i], 0, 'g', 10)));
  QCOMPARE(got.params.size(), want.params.size());
  const double d = max_rel_diff(got.params, want.params);
  QVERIFY2(d <= tol, qPrintable(QString("final params: max_rel_diff %1").arg(d)));
  QCOMPARE(got.evals.size(), want.evals.size());
  for (size_t i = 0; i < want.evals.size(); ++i) {
    QCOMPARE(got.evals[i].step, want.evals[i].step);
    QCOMPARE(got.evals[i].samples, want.evals[i].samples);
    QVERIFY2(close(got.evals[i].loss, want.evals[i].loss, tol),
             qPrintable(QString("eval %1: loss %2, reference %3")
                            .arg(i)
                            .arg(got.evals[i].loss, 0, 'g', 10)
                            .arg(want.evals[i].loss, 0, 'g', 10)));
    // An argmax may flip on a near tie: one row in a hundred at most.
    QVERIFY2(std::fabs(got.evals[i].accuracy - want.evals[i].accuracy) <= 0.01,
             qPrintable(QString("eval %1: accuracy %2, reference %3")
                            .arg(i)
                            .arg(got.evals[i].accuracy)
                            .arg(want.evals[i].accuracy)));
  }
}

}  // namespace
}  // namespace shardlab

using namespace shardlab;

class TestDeviceTraining : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    std::string why;
    if (usable_gpus(&why) == 0) QSKIP(qPrintable(QString("no usable GPU: %1").arg(why.c_str())));
    QVERIFY(device_training_built());
  }

  void mlpMatchesCpu() {
    const JobSpec job = mlp_job();
    compare(gpu_run(job), cpu_run(job));
  }

  void gptMatchesCpu() {
    const JobSpec job = gpt_job();
    compare(gpu_run(job), cpu_run(job));
  }

  void optimizersMatchCpu_data() {
    QTest::addColumn<QString>("name");
    QTest::newRow("adam, accumulation 2, clip 1.0") << QString("adam-acc-clip");
    QTest::newRow("sgd momentum nesterov") << QString("sgd");
    QTest::newRow("adamw") << QString("adamw");
    QTest::newRow("rmsprop momentum") << QString("rmsprop");
    QTest::newRow("adagrad initial accumulator") << QString("adagrad");
  }
  void optimizersMatchCpu() {
    QFETCH(QString, name);
    JobSpec job = mlp_job();
    OptimizerConfig o;
    if (name == "adam-acc-clip") {
      o.name = "adam";
      job.train.accumulation_steps = 2;
      job.train.clip_grad_norm = 1.0;
    } else if (name == "sgd") {
      o.name = "sgd";
      o.lr = 0.05;
      o.momentum = 0.9;
      o.nesterov = true;
      o.weight_decay = 1e-4;
    } else if (name == "adamw") {
      o.name = "adamw";
      o.weight_decay = 0.1;
    } else if (name == "rmsprop") {
      o.name = "rmsprop";
      o.momentum = 0.5;
      o.weight_decay = 1e-4;
    } else {
      o.name = "adagrad";
      o.lr = 0.05;
      o.eps = 1e-10;
      o.initial_accumulator = 0.1;
    }
    job.optimizer = o;
    compare(gpu_run(job), cpu_run(job));
  }

  // GpuOptimizer validates with make_optimizer's messages; Adagrad's initial accumulator is
  // filled on the device.
  void gpuOptimizerState() {
    CudaContext ctx(0);
    OptimizerConfig bad;
    bad.name = "adam";
    bad.momentum = 0.9;  // not used by adam
    try {
      GpuOptimizer opt(bad, 10, ctx);
      QFAIL("no error");
    } catch (const shardlab::InvalidArgument& e) {
      QVERIFY2(QString(e.what()).startsWith("optimizer.momentum: not used by adam"), e.what());
    }
    OptimizerConfig ada;
    ada.name = "adagrad";
    ada.initial_accumulator = 0.25;
    GpuOptimizer opt(ada, 1000, ctx);
    const auto state = opt.download_state();
    QCOMPARE(state.size(), size_t{1});
    QCOMPARE(state[0].first, std::string("sum"));
    QCOMPARE(state[0].second.size(), size_t{1000});
    for (const float v : state[0].second) QVERIFY(v == 0.25f);  // exact (QCOMPARE is fuzzy)
    QCOMPARE(opt.state_bytes(), int64_t{4000});
  }

  // A device run's parameters, gradients and optimizer state are device buffers charged to the
  // ledger of the thread that trains (strategy none: the caller's).
  void ledgerCountsDeviceBytes() {
    JobSpec job = mlp_job();
    job.train.steps = 3;
    MemoryLedger ledger;
    const LedgerScope bind(&ledger);
    int64_t n = 0, params = -1, grads = -1, state = -1;
    TrainerCallbacks cb;
    cb.on_step = [&](const StepInfo&) {
      params = ledger.current(MemCategory::params);
      grads = ledger.current(MemCategory::grads);
      state = ledger.current(MemCategory::optimizer_state);
    };
    job.device = "cuda";
    TrainingSetup s = build_training(job);
    n = s.model->num_params();
    // The host model built by build_training is counted too: measure from here.
    const int64_t host_params = ledger.current(MemCategory::params);
    const int64_t host_grads = ledger.current(MemCategory::grads);
    const int64_t host_state = ledger.current(MemCategory::optimizer_state);
    const int64_t host_acts = ledger.current(MemCategory::activations);
    bool ran = false;
    guard([&] {
      (void)run_device_training(s, cb);
      ran = true;
    });
    if (!ran) return;  // the failure is recorded
    QCOMPARE(params - host_params, n * 4);
    QCOMPARE(grads - host_grads, n * 4);
    QCOMPARE(state - host_state, 2 * n * 4);  // adam: exp_avg, exp_avg_sq
    // Released when the run ends.
    QCOMPARE(ledger.current(MemCategory::params), host_params);
    QCOMPARE(ledger.current(MemCategory::grads), host_grads);
    QCOMPARE(ledger.current(MemCategory::optimizer_state), host_state);
    QCOMPARE(ledger.current(MemCategory::activations), host_acts);
  }

  // ddp over NCCL, one rank (a threads world of one as the bootstrap): the single-GPU run.
  void ddpWorldOneEqualsSingleGpu() {
#if !(defined(SHARDLAB_HAVE_NCCL) && SHARDLAB_HAVE_NCCL)
    QSKIP("this build has no NCCL");
#endif
    const JobSpec job = mlp_job();
    JobSpec ddp = job;
    ddp.parallel.strategy = "ddp";
    ddp.parallel.world_size = 1;
    const TrainResult single = gpu_run(job);
    const TrainResult one = gpu_run(ddp);
    compare(one, single, 1e-6);
  }

  // ddp on two GPUs (each rank its half of every batch, in two micro-batches) against the job in
  // one process on the CPU, which the CPU DDP strategy matches within 1e-5
  // (tests/parallel/tst_sharded_equivalence).
  void ddpTwoGpusMatchesCpu() {
#if !(defined(SHARDLAB_HAVE_NCCL) && SHARDLAB_HAVE_NCCL)
    QSKIP("this build has no NCCL");
#endif
    if (usable_gpus(nullptr) < 2) QSKIP("needs two usable GPUs");
    JobSpec job = mlp_job();
    job.train.accumulation_steps = 2;
    job.train.clip_grad_norm = 1.0;
    const TrainResult want = cpu_run(job);
    job.parallel.strategy = "ddp";
    job.parallel.world_size = 2;
    compare(gpu_run(job), want);
  }

  void jobProblems() {
    JobSpec job = mlp_job();
    job.device = "cuda";
    QCOMPARE(device_job_problem(job), std::string());
    job.parallel.strategy = "zero2";
    job.parallel.world_size = 2;
    QCOMPARE(device_job_problem(job),
             std::string("cuda runs parallel.strategy none or ddp in this version; zero2 runs on "
                         "cpu (--set device=cpu)"));
    job.device = "cpu";
    QCOMPARE(device_job_problem(job), std::string());
  }
};

QTEST_GUILESS_MAIN(TestDeviceTraining)
#include "tst_device_training.moc"
