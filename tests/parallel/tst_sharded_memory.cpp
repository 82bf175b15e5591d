// The memory ledger against the planner, and the planner against the ZeRO paper's formulas
// (Rajbhandari et al. 2019, section 5): what every rank really held after its last step
// equals MemoryPlan::steady for params, grads and optimizer_state, to the byte, with no
// communication buffer left; and the plan's figures are those of the formulas, recomputed here
// from the model's parameter count and block sizes (never from the planner itself).
#include <QElapsedTimer>
#include <QtTest>

#include <map>

#include "engine/core/memory.h"
#include "engine/device/device.h"
#include "engine/optim/optimizer.h"
#include "engine/plan/memory/planner.h"
#include "engine/run/rank_runner.h"
#include "engine/sharding/sharded_options_from_job.h"
#include "kernels/cpu/gemm.h"
#include "tests/parallel/parallel_test_util.h"

using namespace shardlab;
using namespace shardlab::ptest;

namespace {

int64_t round_up(int64_t x, int64_t n) {
  return (x + n - 1) / n * n;
}

// Bytes of optimizer state per parameter, from the base optimizer itself (engine/optim, not the
// planner): attach it to 1,000 elements and count.
int64_t state_bytes_per_param(const OptimizerConfig& config) {
  std::unique_ptr<Optimizer> o = make_optimizer(config);
  o->attach({0, 1000});
  const int64_t bytes = o->state_bytes();
  return bytes / 1000;
}

struct Expected {
  int64_t params = 0, grads = 0, state = 0;  // bytes per rank
  int64_t padded = 0;                        // Psi, Psi' or Psi''
  int64_t shard = 0;                         // elements this rank updates
};

// The ZeRO paper's figures in fp32 with padding: Psi' = Psi rounded up to a multiple of N (ZeRO's
// flat buffer), Psi'' = the sum of every block rounded up to a multiple of N (FSDP pads blocks).
Expected expected_figures(const std::string& strategy, const ParamLayout& layout, int64_t n,
                          int64_t k) {
  const int64_t psi = layout.size();
  const int64_t psi1 = round_up(psi, n);
  int64_t psi2 = 0;
  for (int b = 0; b < layout.num_blocks(); ++b) {
    const int64_t size = layout.block_range(b).size();
    if (size > 0) psi2 += round_up(size, n);
  }
  Expected e;
  if (strategy == "ddp" || strategy == "none") {
    e = {4 * psi, 4 * psi, k * psi, psi, psi};
  } else if (strategy == "zero1") {
    e = {4 * psi1, 4 * psi1, k * psi1 / n, psi1, psi1 / n};
  } else if (strategy == "zero2") {
    e = {4 * psi1, 4 * psi1 / n, k * psi1 / n, psi1, psi1 / n};
  } else if (strategy == "fsdp") {
    e = {4 * psi2 / n, 4 * psi2 / n, k * psi2 / n, psi2, psi2 / n};
  }
  return e;
}

int64_t steady_sum(const MemoryFigures& f) {
  return f[MemCategory::params] + f[MemCategory::grads] + f[MemCategory::optimizer_state];
}

QString figures(const MemoryFigures& f) {
  return QString("params %1, grads %2, state %3, activations %4, comm %5")
      .arg(f[MemCategory::params])
      .arg(f[MemCategory::grads])
      .arg(f[MemCategory::optimizer_state])
      .arg(f[MemCategory::activations])
      .arg(f[MemCategory::comm]);
}

}  // namespace

class TestShardedMemory : public QObject {
  Q_OBJECT

 private:
  Datasets mnist_;
  Datasets chars_;
  int64_t vocab_ = 0;
  QElapsedTimer clock_;
  // Rank reports of every run, by "strategy/optimizer/world", for the cross-strategy checks.
  std::map<QString, std::vector<RankReport>> reports_;

  JobSpec job_for(const QString& model, const QString& strategy, int world,
                  const QString& optimizer) {
    JobSpec job = model == "gpt" ? gpt_job(strategy.toStdString(), world, vocab_)
                                 : mlp_job(strategy.toStdString(), world, optimizer.toStdString());
    if (model != "gpt") job.optimizer = optimizer_config(optimizer.toStdString());
    job.train.steps = 3;
    job.train.batch_size = 24;
    return job;
  }

  const Datasets& data_for(const QString& model) const { return model == "gpt" ? chars_ : mnist_; }

 private slots:
  void initTestCase() {
    kernels::use_single_blas_thread();
    clock_.start();
    if (!have_fashion_mnist()) QSKIP(kNoFashionMnist);
    mnist_ = load_datasets(mlp_data(), 0);
    chars_ = load_datasets(gpt_data(), 8);
    vocab_ = chars_.train->num_classes();
  }

  void cleanupTestCase() { qInfo("suite ran %.1f s", static_cast<double>(clock_.elapsed()) / 1e3); }

  // The planner's figures are the formulas', for every strategy, optimizer and many world sizes
  // (nothing runs: the plan alone). model_layout() matches the built model's layout.
  void plannerMatchesFormulas_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<QString>("optimizer");
    QTest::addColumn<bool>("momentum");
    QTest::addColumn<int>("world");
    for (const char* model : {"mlp", "gpt"})
      for (const char* s : {"none", "ddp", "zero1", "zero2", "fsdp"})
        for (const char* o : {"sgd", "adam", "adamw", "rmsprop", "adagrad"})
          for (bool mom : {false, true}) {
            if (mom && QString(o) != "sgd" && QString(o) != "rmsprop") continue;
            for (int w : {1, 2, 3, 4, 5, 7, 8, 16, 1000}) {
              if (QString(s) == "none" && w != 1) continue;
              QTest::addRow("%s/%s/%s%s/w%d", model, s, o, mom ? "-momentum" : "", w)
                  << QString(model) << QString(s) << QString(o) << mom << w;
            }
          }
  }

  void plannerMatchesFormulas() {
    QFETCH(QString, model);
    QFETCH(QString, strategy);
    QFETCH(QString, optimizer);
    QFETCH(bool, momentum);
    QFETCH(int, world);
    JobSpec job = job_for(model, strategy, world, optimizer);
    job.optimizer = optimizer_config(optimizer.toStdString());
    job.optimizer.momentum = momentum ? 0.9 : 0.0;

    std::unique_ptr<Model> built = build_model(job.model);
    const ParamLayout& layout = built->layout();
    const ParamLayout planned = model_layout(job.model);
    QCOMPARE(planned.size(), layout.size());
    QCOMPARE(planned.num_blocks(), layout.num_blocks());
    for (int b = 0; b < layout.num_blocks(); ++b) {
      QCOMPARE(planned.block_range(b).begin, layout.block_range(b).begin);
      QCOMPARE(planned.block_range(b).end, layout.block_range(b).end);
    }

    const int64_t k = state_bytes_per_param(job.optimizer);
    QCOMPARE(optimizer_state_floats(job.optimizer) * 4, static_cast<int>(k));
    const Expected e = expected_figures(strategy.toStdString(), layout, world, k);
    const MemoryPlan plan = plan_memory(layout, job.optimizer, job.parallel, world);
    const QString got = figures(plan.steady);
    QCOMPARE(plan.params, layout.size());
    QCOMPARE(plan.padded_params, e.padded);
    QCOMPARE(plan.shard, e.shard);
    QCOMPARE(plan.state_floats * 4, static_cast<int>(k));
    QVERIFY2(plan.steady[MemCategory::params] == e.params, qPrintable(got));
    QVERIFY2(plan.steady[MemCategory::grads] == e.grads, qPrintable(got));
    QVERIFY2(plan.steady[MemCategory::optimizer_state] == e.state, qPrintable(got));
    QCOMPARE(plan.steady[MemCategory::activations], int64_t(0));
    QCOMPARE(plan.steady[MemCategory::comm], int64_t(0));
    // A step never holds less than the steady state.
    for (MemCategory c : {MemCategory::params, MemCategory::grads, MemCategory::optimizer_state})
      QVERIFY2(plan.peak[c] >= plan.steady[c], qPrintable(figures(plan.peak)));
    QVERIFY2(
        QString::fromStdString(plan.formula).startsWith(strategy == "none" ? QString() : strategy),
        plan.formula.c_str());
    if (world >= 2 && strategy == "fsdp")  // a gathered block is live during a step
      QVERIFY2(plan.peak[MemCategory::params] > plan.steady[MemCategory::params],
               qPrintable(figures(plan.peak)));
    if (world >= 2 && strategy == "zero2")  // the full gradient buffer is live during backward
      QVERIFY2(plan.peak[MemCategory::grads] > plan.steady[MemCategory::grads],
               qPrintable(figures(plan.peak)));
  }

  // What each rank really held after its last step is the plan's steady state.
  void ledgerMatchesPlanner_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<QString>("optimizer");
    QTest::addColumn<int>("world");
    QTest::addColumn<QString>("device");
    for (const char* s : {"ddp", "zero1", "zero2", "fsdp"}) {
      for (const char* o : {"adam", "sgd"})
        for (int w : {1, 2, 3, 4, 8})
          QTest::addRow("mlp/%s/%s/w%d", s, o, w)
              << QString("mlp") << QString(s) << QString(o) << w << QString("cpu");
      QTest::addRow("gpt/%s/adam/w3", s)
          << QString("gpt") << QString(s) << QString("adam") << 3 << QString("cpu");
      // The same ledger on device memory: each rank on a test device of its own.
      for (const char* m : {"mlp", "gpt"})
        QTest::addRow("%s/%s/adam/w3/test", m, s)
            << QString(m) << QString(s) << QString("adam") << 3 << QString("test");
    }
  }

  void ledgerMatchesPlanner() {
    QFETCH(QString, model);
    QFETCH(QString, strategy);
    QFETCH(QString, optimizer);
    QFETCH(int, world);
    QFETCH(QString, device);
    JobSpec job = job_for(model, strategy, world, optimizer);
    job.device = device.toStdString();
    std::unique_ptr<Model> built = build_model(job.model);
    const int64_t k = state_bytes_per_param(job.optimizer);
    QVERIFY(k > 0);  // Adam and SGD with momentum both keep state
    const Expected e = expected_figures(strategy.toStdString(), built->layout(), world, k);

    const ParallelRunResult run = run_threads_job(job, data_for(model));
    QCOMPARE(run.result.steps, job.train.steps);
    QCOMPARE(static_cast<int>(run.ranks.size()), world);
    for (int r = 0; r < world; ++r) {
      const RankReport& rep = run.ranks[static_cast<size_t>(r)];
      const MemoryFigures& cur = rep.memory.current;
      const MemoryFigures& steady = rep.plan.steady;
      const QString where =
          QString("rank %1: ledger {%2}, plan {%3}").arg(r).arg(figures(cur)).arg(figures(steady));
      QCOMPARE(rep.rank, r);
      // The plan is the formula (independently of the ledger)...
      QVERIFY2(steady[MemCategory::params] == e.params, qPrintable(where));
      QVERIFY2(steady[MemCategory::grads] == e.grads, qPrintable(where));
      QVERIFY2(steady[MemCategory::optimizer_state] == e.state, qPrintable(where));
      // ...and the ledger holds exactly the plan.
      for (MemCategory c : {MemCategory::params, MemCategory::grads, MemCategory::optimizer_state})
        QVERIFY2(cur[c] == steady[c],
                 qPrintable(QString("%1 differs: %2").arg(to_string(c)).arg(where)));
      QVERIFY2(cur[MemCategory::comm] == 0, qPrintable(where));
      // Peaks: never below the steady state; FSDP's gathered block and ZeRO-2's full gradient
      // buffer were live at some point during the run.
      const MemoryFigures& peak = rep.memory.peak;
      for (MemCategory c : {MemCategory::params, MemCategory::grads, MemCategory::optimizer_state})
        QVERIFY(peak[c] >= cur[c]);
      if (world >= 2 && strategy == "fsdp")
        QVERIFY2(peak[MemCategory::params] > cur[MemCategory::params],
                 qPrintable(QString("peak {%1}").arg(figures(peak))));
      if (world >= 2 && strategy == "zero2")
        QVERIFY2(peak[MemCategory::grads] > cur[MemCategory::grads],
                 qPrintable(QString("peak {%1}").arg(figures(peak))));
      if (r == 0 && world == 3)
        qInfo("%s  peak {%s}  plan.peak {%s}", qPrintable(where), qPrintable(figures(peak)),
              qPrintable(figures(rep.plan.peak)));
    }
    if (device == "cpu")
      reports_[QString("%1/%2/%3/%4").arg(model, strategy, optimizer).arg(world)] = run.ranks;
  }

  // During training steps (peaks restarted after set-up, no evaluation) each rank holds at most
  // what MemoryPlan::peak says, and reaches it: the planner's peak is the measured one.
  void stepPeakMatchesPlanner_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("world");
    QTest::addColumn<bool>("overlap");
    QTest::addColumn<bool>("keep_params");
    QTest::addColumn<QString>("device");
    const QString cpu("cpu"), test("test");
    for (const char* s : {"ddp", "zero1", "zero2", "fsdp"})
      for (int w : {1, 2, 3, 4, 8})
        for (bool overlap : {true, false})
          QTest::addRow("mlp/%s/w%d%s", s, w, overlap ? "" : "/no-overlap")
              << QString("mlp") << QString(s) << w << overlap << false << cpu;
    for (int w : {1, 2, 3, 8})
      for (bool overlap : {true, false})
        QTest::addRow("mlp/fsdp/w%d/keep-params%s", w, overlap ? "" : "/no-overlap")
            << QString("mlp") << QString("fsdp") << w << overlap << true << cpu;
    // The GPT has four blocks, so keeping gathered blocks from forward to backward shows.
    for (const char* s : {"ddp", "zero1", "zero2", "fsdp"})
      for (bool overlap : {true, false})
        QTest::addRow("gpt/%s/w3%s", s, overlap ? "" : "/no-overlap")
            << QString("gpt") << QString(s) << 3 << overlap << false << cpu;
    for (bool overlap : {true, false})
      QTest::addRow("gpt/fsdp/w3/keep-params%s", overlap ? "" : "/no-overlap")
          << QString("gpt") << QString("fsdp") << 3 << overlap << true << cpu;
    // On device memory (each rank a test device of its own): the same peaks, whatever the staged
    // collectives hold as comm.
    for (const char* s : {"ddp", "zero1", "zero2", "fsdp"})
      QTest::addRow("gpt/%s/w3/test", s)
          << QString("gpt") << QString(s) << 3 << true << false << test;
    QTest::addRow("gpt/fsdp/w3/keep-params/test")
        << QString("gpt") << QString("fsdp") << 3 << true << true << test;
  }

  void stepPeakMatchesPlanner() {
    QFETCH(QString, model);
    QFETCH(QString, strategy);
    QFETCH(int, world);
    QFETCH(bool, overlap);
    QFETCH(bool, keep_params);
    QFETCH(QString, device);
    JobSpec job = job_for(model, strategy, world, "adam");
    job.device = device.toStdString();
    job.parallel.overlap = overlap;
    job.parallel.fsdp_keep_params = keep_params;
    std::vector<MemorySnapshot> steps(static_cast<size_t>(world));
    std::vector<MemoryPlan> plans(static_cast<size_t>(world));
    run_threads(world, test_comm_options(), [&](Communicator& c) {
      // The rank's device first (it outlives the optimizer), as rank_runner makes it.
      std::unique_ptr<Device> dev =
          device == "cpu" ? nullptr : make_device(parse_device_kind(job.device));
      MemoryLedger ledger;
      LedgerScope bind(&ledger);
      ShardedOptions options = sharded_options(job);
      options.device = dev.get();
      auto opt = ShardedOptimizer::create(c, options);
      ledger.reset_peaks();
      OptimizeInput in;
      in.train = data_for(model).train.get();
      opt->optimize(in);
      steps[static_cast<size_t>(c.rank())] = ledger.snapshot();
      plans[static_cast<size_t>(c.rank())] =
          plan_memory(opt->model().layout(), job.optimizer, job.parallel, world);
    });
    for (int r = 0; r < world; ++r) {
      const MemoryFigures& peak = steps[size_t(r)].peak;
      const MemoryFigures& plan = plans[size_t(r)].peak;
      const QString where = QString("rank %1: measured step peak {%2}, plan.peak {%3}")
                                .arg(r)
                                .arg(figures(peak), figures(plan));
      if (r == 0) qDebug("%s", qPrintable(where));
      for (MemCategory c : {MemCategory::params, MemCategory::grads, MemCategory::optimizer_state})
        QVERIFY2(peak[c] == plan[c], qPrintable(QString("%1: %2").arg(to_string(c)).arg(where)));
    }
    // Keeping gathered blocks costs memory once there are more than two blocks (the MLP's two are
    // both live at once anyway).
    if (keep_params && model == "gpt") {
      ParallelConfig reshard = job.parallel;
      reshard.fsdp_keep_params = false;
      const MemoryPlan lean = plan_memory(model_layout(job.model), job.optimizer, reshard, world);
      QVERIFY2(plans[0].peak[MemCategory::params] > lean.peak[MemCategory::params],
               qPrintable(QString("keep %1, reshard %2")
                              .arg(plans[0].peak[MemCategory::params])
                              .arg(lean.peak[MemCategory::params])));
    }
  }

  // More sharding, less memory: for N >= 2 every rank of zero2 holds less than zero1's, zero1
  // less than ddp's and fsdp less than zero2's (measured, params + grads + state). Uses the runs of
  // ledgerMatchesPlanner.
  void shardingSavesMemory_data() {
    QTest::addColumn<QString>("optimizer");
    QTest::addColumn<int>("world");
    for (const QString& o : {QString("adam"), QString("sgd")})
      for (int w : {2, 3, 4, 8}) QTest::addRow("%s/w%d", qPrintable(o), w) << o << w;
  }

  void shardingSavesMemory() {
    QFETCH(QString, optimizer);
    QFETCH(int, world);
    std::map<QString, int64_t> total;
    for (const char* s : {"ddp", "zero1", "zero2", "fsdp"}) {
      const QString key = QString("mlp/%1/%2/%3").arg(s, optimizer).arg(world);
      auto it = reports_.find(key);
      if (it == reports_.end())
        QSKIP(qPrintable("no run of " + key + " (run ledgerMatchesPlanner too)"));
      int64_t most = 0;
      for (const RankReport& rep : it->second)
        most = std::max(most, steady_sum(rep.memory.current));
      total[s] = most;
    }
    const QString all = QString("ddp %1, zero1 %2, zero2 %3, fsdp %4")
                            .arg(total["ddp"])
                            .arg(total["zero1"])
                            .arg(total["zero2"])
                            .arg(total["fsdp"]);
    QVERIFY2(total["zero1"] < total["ddp"], qPrintable(all));
    QVERIFY2(total["zero2"] < total["zero1"], qPrintable(all));
    QVERIFY2(total["fsdp"] < total["zero2"], qPrintable(all));
  }
};

QTEST_GUILESS_MAIN(TestShardedMemory)
#include "tst_sharded_memory.moc"
