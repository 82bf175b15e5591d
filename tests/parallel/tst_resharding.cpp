// Resharding: a checkpoint written by one strategy and layout loads into another with identical
// model parameters and optimizer state (rank_checkpoint.h). For each pair of layouts (A -> B):
//
//   1. A trains k steps (own ranks via run_threads, the same save_checkpoint run_rank uses),
//      saving its step-k checkpoint to dir1 and keeping its gather_params() at step k (the
//      independent reference); it then runs on to n = k + 3 steps (the uninterrupted run).
//   2. B's ranks create B's optimizer, load_checkpoint(dir1), save_checkpoint(dir2) at once and
//      gather their parameters.
//   3. B's parameters equal A's at step k bit for bit; "param" and every optimizer state array of
//      dir1 and dir2 (read_checkpoint_tensor: the whole model, whatever layout wrote it) are
//      bit-identical, and dir1's parameters are A's; both training positions are equal.
//   4. A run of B's job resumed from dir1 (run_threads_job, RankRunOptions::resume_from) reports
//      steps k+1..n only and the resharding, and ends within the tolerance measured on the job
//      (engine/job/equivalence.h) of A's uninterrupted n-step run (not bit for bit: another
//      layout reduces in another order).
//
// Rows: the Fashion-MNIST MLP (Adam; one row SGD with momentum, one RMSprop) between ddp, zero1,
// zero2 and fsdp on 1 to 4 ranks (3 divides none of the parameter counts: uneven padding), and
// the tiny GPT between pp x tp x dp layouts (2x2x2 -> 1x1x1, 1x1x1 -> 1x2x2, 2x2x2 -> 2x1x2,
// 2x2x2 -> 1x2x1). Refusals: a missing shard is named; a GPT checkpoint is refused by an MLP job
// naming the model.
#include <QTemporaryDir>
#include <QtTest>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "engine/checkpoint/checkpoint_shards.h"
#include "engine/checkpoint/checkpoint_store.h"
#include "engine/checkpoint/rank_checkpoint.h"
#include "engine/comm/threads/world.h"
#include "engine/core/memory.h"
#include "engine/hybrid/hybrid_optimizer.h"
#include "engine/job/build.h"
#include "engine/plan/memory/planner.h"
#include "engine/run/rank_runner.h"
#include "engine/sharding/sharded_options_from_job.h"
#include "engine/strategies/sharded_optimizer.h"
#include "tests/common/caught.h"
#include "tests/parallel/parallel_test_util.h"

using namespace shardlab;
using namespace shardlab::ptest;
using shardlab::test::caught;

namespace fs = std::filesystem;

namespace {

constexpr int64_t kK = 4;       // the checkpoint's step
constexpr int64_t kN = kK + 3;  // the end of the runs

// A layout "strategy/world" (1-D) or "strategy/PPxTPxDP" (3-D, GPT only), "strategy/PPxTPxDPvV"
// for interleaved 1F1B with V chunks a stage.
struct LayoutSpec {
  std::string strategy;
  int pp = 1, tp = 1, dp = 1;
  int chunks = 1;
  bool three_d = false;
  int world() const { return pp * tp * dp; }
};

LayoutSpec parse_layout(const QString& s) {
  const QStringList parts = s.split('/');
  LayoutSpec l;
  l.strategy = parts.value(0).toStdString();
  const QStringList dims = parts.value(1).split('x');
  if (dims.size() == 3) {
    l.three_d = true;
    l.pp = dims[0].toInt();
    l.tp = dims[1].toInt();
    const QStringList dp_v = dims[2].split('v');
    l.dp = dp_v[0].toInt();
    l.chunks = dp_v.size() == 2 ? dp_v[1].toInt() : 1;
  } else {
    l.dp = dims.value(0).toInt();
  }
  return l;
}

// The job of a row on a layout: n steps, evaluations every 3 steps with a patience that never
// fires (live early-stopping state at step k), the MLP with a warm-up cosine schedule (the step
// count matters). A 3-D layout with pp = tp = 1 runs as a 1-D job (run_rank's ShardedOptimizer).
JobSpec job_of(const QString& model, const QString& optimizer, const LayoutSpec& l) {
  JobSpec j;
  if (model == "gpt") {
    j = gpt_job(l.strategy, l.world(), corpus_vocab());
    j.train.batch_size = 8;
    if (l.pp > 1 || l.tp > 1) {
      j.parallel.pp = l.pp;
      j.parallel.tp = l.tp;
      j.parallel.dp = l.dp;
      if (l.pp > 1) {
        j.parallel.micro_batches = 2;
        j.parallel.schedule = l.chunks > 1 ? "interleaved" : "1f1b";
        j.parallel.pp_chunks = l.chunks;
      }
    }
  } else {
    j = mlp_job(l.strategy, l.world(), optimizer.toStdString());
    j.train.schedule.kind = "warmup_cosine";
    j.train.schedule.warmup_steps = 3;
    j.train.schedule.min_lr_ratio = 0.1;
  }
  j.train.steps = kN;
  j.train.log_every = 100;
  j.train.eval_every = 3;
  j.train.early_stopping.patience = 50;
  return j;
}

CommOptions comm_options_of(const JobSpec& job) {
  CommOptions o;
  o.timeout =
      std::chrono::milliseconds(static_cast<int64_t>(std::llround(job.parallel.timeout_s * 1000)));
  return o;
}

// Runs fn(opt, comm) on every rank of `job` with the optimizer run_rank would build for it
// (HybridShardedOptimizer with pp or tp, ShardedOptimizer otherwise).
template <class Fn>
void on_ranks(const JobSpec& job, Fn&& fn) {
  run_threads(static_cast<int>(job.parallel.world_size), comm_options_of(job),
              [&](Communicator& comm) {
                MemoryLedger ledger;
                LedgerScope bind(&ledger);
                if (uses_model_parallelism(job.parallel)) {
                  auto opt = HybridShardedOptimizer::create(comm, sharded_options(job));
                  fn(*opt, comm);
                } else {
                  auto opt = ShardedOptimizer::create(comm, sharded_options(job));
                  fn(*opt, comm);
                }
              });
}

struct ReferenceRun {
  std::vector<float> at_k;   // gather_params() after step k
  std::vector<float> final;  // the result's params after step n
  std::string ckpt;          // the step-k checkpoint's step directory
};

// Layout A: trains n steps, saving the step-k checkpoint to `dir` and keeping its parameters.
ReferenceRun train_reference(const JobSpec& job, const std::string& dir) {
  ReferenceRun out;
  std::mutex mu;
  const Datasets& data = data_of(job);
  on_ranks(job, [&](auto& opt, Communicator& comm) {
    OptimizeInput in;
    in.train = data.train.get();
    in.eval = data.eval.get();
    std::vector<float> at_k;
    std::string ckpt;
    in.after_step = [&](int64_t done, bool) {
      if (done != kK) return;
      at_k = opt.gather_params();
      ckpt = save_checkpoint(comm, opt, dir, 0);
    };
    TrainResult r = opt.optimize(in);
    if (comm.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      out.at_k = std::move(at_k);
      out.final = std::move(r.params);
      out.ckpt = ckpt;
    }
  });
  return out;
}

struct Reloaded {
  std::vector<float> params;  // B's gather_params() right after the load
  std::string ckpt;           // the step directory B saved at once
  std::string resharding;     // resharding(manifest, B's layout)
  int64_t steps_done = -1;
};

// Layout B: loads `from`, saves to `dir` at once, gathers its parameters.
Reloaded reload(const JobSpec& job, const std::string& from, const std::string& dir) {
  Reloaded out;
  std::mutex mu;
  on_ranks(job, [&](auto& opt, Communicator& comm) {
    const CheckpointManifest m = load_checkpoint(comm, opt, from);
    const std::string ckpt = save_checkpoint(comm, opt, dir, 0);
    std::vector<float> params = opt.gather_params();
    if (comm.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      out.params = std::move(params);
      out.ckpt = ckpt;
      out.resharding = resharding(m, checkpoint_layout(opt));
      out.steps_done = opt.steps_done();
    }
  });
  return out;
}

QString q(const std::string& s) {
  return QString::fromStdString(s);
}

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

QString describe(const TrainingProgress& p) {
  return QString(
             "steps %1 sampler %2 (epoch %3 index %4) early best %5 without gain %6 seen %7 "
             "stop %8 optimizer steps %9")
      .arg(p.steps_done)
      .arg(p.has_sampler)
      .arg(p.sampler.epoch)
      .arg(p.sampler.index)
      .arg(p.early.best, 0, 'g', 17)
      .arg(p.early.without_gain)
      .arg(p.early.seen)
      .arg(p.early.stop)
      .arg(p.optimizer_steps);
}

bool same_progress(const TrainingProgress& a, const TrainingProgress& b) {
  return a.steps_done == b.steps_done && a.has_sampler == b.has_sampler &&
         a.sampler.epoch == b.sampler.epoch && a.sampler.index == b.sampler.index &&
         same_bits(a.early.best, b.early.best) && a.early.without_gain == b.early.without_gain &&
         a.early.seen == b.early.seen && a.early.stop == b.early.stop &&
         a.optimizer_steps == b.optimizer_steps;
}

}  // namespace

class TestResharding : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir tmp_;
  std::map<std::string, std::string> ckpts_;  // row's A checkpoint (step k) by row name
  double worst_mlp_ = 0, worst_gpt_ = 0;

  std::string path(const QString& name) const { return tmp_.filePath(name).toStdString(); }

 private slots:
  void initTestCase() { QVERIFY(tmp_.isValid()); }

  void roundTrip_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("optimizer");
    QTest::addColumn<QString>("a");
    QTest::addColumn<QString>("b");
    QTest::addColumn<QStringList>("state");  // the optimizer's state arrays
    const QStringList adam{"exp_avg", "exp_avg_sq"};
    const auto row = [](const char* model, const char* optimizer, const char* a, const char* b,
                        const QStringList& state) {
      QString name = QString("%1 %2 -> %3").arg(model, a, b);
      if (QString(optimizer) != "adam")
        name = QString("%1 %2 %3 -> %4").arg(model, optimizer, a, b);
      QTest::newRow(qPrintable(name))
          << QString(model) << QString(optimizer) << QString(a) << QString(b) << state;
    };
    // The MLP: 1-D strategies on 1 to 4 ranks (3 divides no parameter count: uneven padding).
    row("mlp", "adam", "zero2/4", "fsdp/2", adam);
    row("mlp", "adam", "fsdp/2", "zero1/3", adam);
    row("mlp", "adam", "ddp/4", "zero2/1", adam);
    row("mlp", "adam", "zero1/1", "ddp/2", adam);
    row("mlp", "sgd", "zero2/3", "fsdp/4", {"momentum_buffer"});
    row("mlp", "rmsprop", "fsdp/3", "ddp/2", {"square_avg"});
    // The GPT: pp x tp x dp (1x1x1 is the 1-D ddp job on one rank).
    row("gpt", "adam", "zero1/2x2x2", "ddp/1x1x1", adam);
    row("gpt", "adam", "ddp/1x1x1", "zero2/1x2x2", adam);
    row("gpt", "adam", "zero1/2x2x2", "zero2/2x1x2", adam);
    row("gpt", "adam", "zero2/2x2x2", "ddp/1x2x1", adam);
    // A hybrid DDP writer with tp and dp > 1: only dp rank 0 writes, and tp rank 1 leaves the
    // replicated parameters to tp rank 0.
    row("gpt", "adam", "ddp/1x2x2", "zero1/2x1x2", adam);
    // Interleaved 1F1B (2 chunks a stage: stage 0 holds blocks 0 and 2, not 0 and 1) to and from
    // the plain layouts.
    row("gpt", "adam", "zero1/2x2x2v2", "ddp/1x1x1", adam);
    row("gpt", "adam", "zero2/2x1x2", "zero1/2x1x1v2", adam);
  }

  void roundTrip() {
    QFETCH(QString, model);
    QFETCH(QString, optimizer);
    QFETCH(QString, a);
    QFETCH(QString, b);
    QFETCH(QStringList, state);
    if (model == "mlp" && !have_fashion_mnist()) QSKIP(kNoFashionMnist);
    const QString tag = QString(QTest::currentDataTag()).replace(' ', '_').replace('/', '_');
    const JobSpec a_job = job_of(model, optimizer, parse_layout(a));
    const JobSpec b_job = job_of(model, optimizer, parse_layout(b));
    const int64_t total = model_layout(a_job.model).size();
    if (model == "mlp") QCOMPARE(total, kMlpParams);

    // 1. A: k steps, checkpoint, on to n.
    const std::string dir1 = path(tag + "-1"), dir2 = path(tag + "-2");
    const ReferenceRun ref = train_reference(a_job, dir1);
    QCOMPARE(ref.ckpt, step_dir(dir1, kK));
    QCOMPARE(static_cast<int64_t>(ref.at_k.size()), total);
    QCOMPARE(static_cast<int64_t>(ref.final.size()), total);
    QVERIFY(!bit_equal(ref.at_k, ref.final));
    ckpts_[QTest::currentDataTag()] = ref.ckpt;

    // 2. B: load, save at once, gather.
    const Reloaded re = reload(b_job, ref.ckpt, dir2);
    QCOMPARE(re.ckpt, step_dir(dir2, kK));
    QCOMPARE(re.steps_done, kK);
    QVERIFY2(q(re.resharding).contains("->"), qPrintable(q(re.resharding)));

    // 3. The same parameters and state, whichever layout holds them.
    QVERIFY2(bit_equal(re.params, ref.at_k),
             qPrintable(QString("B's parameters differ from A's at step %1 first at %2")
                            .arg(kK)
                            .arg(first_bit_difference(re.params, ref.at_k))));
    CheckpointManifest m1, m2;
    TrainingProgress p1, p2;
    const std::vector<float> param1 = read_checkpoint_tensor(ref.ckpt, "param", &m1, &p1);
    const std::vector<float> param2 = read_checkpoint_tensor(re.ckpt, "param", &m2, &p2);
    QCOMPARE(q(m1.strategy), q(a_job.parallel.strategy));
    QCOMPARE(m1.world_size, static_cast<int>(a_job.parallel.world_size));
    QCOMPARE(q(m2.strategy), q(b_job.parallel.strategy));
    QCOMPARE(m2.world_size, static_cast<int>(b_job.parallel.world_size));
    QCOMPARE(static_cast<int>(m2.shards.size()), m2.world_size);
    QCOMPARE(m1.step, kK);
    QCOMPARE(m2.step, kK);
    QCOMPARE(q(resharding(
                 m1, CheckpointLayout{m2.strategy, m2.world_size, m2.pp, m2.tp, m2.dp, m2.layout})),
             q(re.resharding));
    QVERIFY2(m1.layout == m2.layout, qPrintable(q(m1.layout.dump() + " vs " + m2.layout.dump())));
    QStringList names;
    for (const auto& s : m1.layout.at("optimizer_state")) names << q(s.get<std::string>());
    QCOMPARE(names, state);
    QVERIFY2(bit_equal(param1, ref.at_k), "A's checkpoint does not hold A's parameters");
    QVERIFY2(
        bit_equal(param2, param1),
        qPrintable(QString("param differs first at %1").arg(first_bit_difference(param2, param1))));
    for (const QString& name : state) {
      const std::vector<float> s1 = read_checkpoint_tensor(ref.ckpt, name.toStdString());
      const std::vector<float> s2 = read_checkpoint_tensor(re.ckpt, name.toStdString());
      QCOMPARE(static_cast<int64_t>(s1.size()), total);
      QVERIFY2(std::any_of(s1.begin(), s1.end(), [](float v) { return v != 0; }),
               qPrintable(name + " is all zeros at step k"));
      QVERIFY2(bit_equal(s2, s1),
               qPrintable(
                   QString("%1 differs first at %2").arg(name).arg(first_bit_difference(s2, s1))));
    }
    QVERIFY2(same_progress(p1, p2), qPrintable(describe(p1) + "\n vs " + describe(p2)));
    QCOMPARE(p1.steps_done, kK);
    QCOMPARE(p1.optimizer_steps, kK);
    QVERIFY(p1.has_sampler);
    QCOMPARE(p1.early.seen, int64_t(1));  // the evaluation after step 3

    // 4. B resumed from A's checkpoint continues to n like A's uninterrupted run.
    std::vector<int64_t> steps;
    std::vector<std::pair<int64_t, std::string>> resumes;
    RankRunOptions o;
    o.resume_from = dir1;  // its latest complete step: k
    o.callbacks.on_step = [&](const StepInfo& i) { steps.push_back(i.step); };
    o.on_resume = [&](int64_t step, const std::string& r) { resumes.emplace_back(step, r); };
    const ParallelRunResult cont = run_threads_job(b_job, data_of(b_job), o);
    std::vector<int64_t> expected;
    for (int64_t s = kK + 1; s <= kN; ++s) expected.push_back(s);
    QCOMPARE(steps, expected);
    QCOMPARE(cont.result.steps, kN);
    QCOMPARE(static_cast<int>(resumes.size()), 1);
    QCOMPARE(resumes[0].first, kK);
    QCOMPARE(q(resumes[0].second), q(re.resharding));
    const double diff = rel_diff(cont.result.params, ref.final);
    double& worst = model == "gpt" ? worst_gpt_ : worst_mlp_;
    worst = std::max(worst, diff);
    qInfo("%s: %s; after step %lld: max relative difference %.3g", QTest::currentDataTag(),
          re.resharding.c_str(), static_cast<long long>(kN), diff);
    // Not bit for bit: B reduces steps k+1..n in another order than A. Both layouts' tolerances
    // are measured on the job (engine/job/equivalence.h: a small multiple of its noise floor).
    const Judged& ja = judged(a_job);
    const Judged& jb = judged(b_job);
    std::string why;
    QVERIFY2(floor_is_consistent(ja.floor, &why) && floor_is_consistent(jb.floor, &why),
             why.c_str());
    const double tolerance = std::max(ja.tol.params, jb.tol.params);
    QVERIFY2(diff <= tolerance,
             qPrintable(QString("relative difference %1 > tolerance %2").arg(diff).arg(tolerance)));
  }

  // A checkpoint missing a shard fails the load on every rank naming the file, before any step.
  void missingShardIsNamed() {
    const std::string from = "mlp zero2/4 -> fsdp/2";
    if (!ckpts_.count(from)) QSKIP("needs roundTrip(mlp zero2/4 -> fsdp/2)");
    const std::string copy = path("missing-shard");
    fs::copy(ckpts_[from], copy, fs::copy_options::recursive);
    const std::string gone = copy + "/shard-00002.bin";
    QVERIFY(fs::remove(gone));
    int64_t steps = 0;
    RankRunOptions o;
    o.resume_from = copy;
    o.callbacks.on_step = [&](const StepInfo&) { ++steps; };
    const JobSpec job = job_of("mlp", "adam", parse_layout("fsdp/2"));
    const auto [type, what] = caught([&] { run_threads_job(job, mnist_data(), o); });
    QCOMPARE(q(type), QString("IoError"));
    QVERIFY2(q(what).contains(q(gone)) && q(what).contains("missing shard for rank 2"),
             qPrintable(q(what)));
    QCOMPARE(steps, int64_t(0));
    const auto [type2, what2] = caught([&] { read_checkpoint_tensor(copy, "exp_avg"); });
    QCOMPARE(q(type2), QString("IoError"));
    QVERIFY2(q(what2).contains(q(gone)), qPrintable(q(what2)));
  }

  // A GPT checkpoint does not load into an MLP job: refused naming the model.
  void otherModelIsRefused() {
    const std::string from = "gpt zero1/2x2x2 -> ddp/1x1x1";
    if (!ckpts_.count(from)) QSKIP("needs roundTrip(gpt zero1/2x2x2 -> ddp/1x1x1)");
    if (!have_fashion_mnist()) QSKIP(kNoFashionMnist);
    int64_t steps = 0;
    RankRunOptions o;
    o.resume_from = ckpts_[from];
    o.callbacks.on_step = [&](const StepInfo&) { ++steps; };
    const JobSpec job = job_of("mlp", "adam", parse_layout("zero2/2"));
    const auto [type, what] = caught([&] { run_threads_job(job, mnist_data(), o); });
    QCOMPARE(q(type), QString("InvalidArgument"));
    QVERIFY2(q(what).contains("cannot resume this job from it"), qPrintable(q(what)));
    QVERIFY2(q(what).contains("model layout model: checkpoint \"gpt\", this job \"mlp\""),
             qPrintable(q(what)));
    QCOMPARE(steps, int64_t(0));
  }

  // ShardSet on hand-made shards: two halves of an 8-element model read back whole; shards from
  // different training positions, elements past the model and elements no shard holds are each
  // refused naming the problem.
  void shardSetChecksWhatItReads() {
    const std::string dir = path("hand-made");
    const auto write = [&](int rank, int64_t begin, int64_t steps) {
      TrainingProgress p;
      p.steps_done = steps;
      ShardHeader h;
      h.rank = rank;
      h.step = 5;
      h.progress = to_json(p);
      h.runs = {{begin, 4}};
      std::vector<float> v(4);
      for (int i = 0; i < 4; ++i) v[static_cast<size_t>(i)] = static_cast<float>(begin + i + 1);
      return write_shard(dir, 5, rank, encode_shard(h, {{"param", v}}));
    };
    CheckpointManifest m;
    m.step = 5;
    m.world_size = 2;
    m.shards = {write(0, 0, 5), write(1, 4, 5)};
    const std::string sd = step_dir(dir, 5);
    {
      ShardSet set(sd, m, 8);
      std::vector<float> all(8);
      set.read("param", identity_map(8), all);
      QCOMPARE(all, (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
      QCOMPARE(set.progress().steps_done, int64_t{5});
      const auto [type, what] = caught([&] { set.read("param", identity_map(10), all); });
      QCOMPARE(q(type), QString("InternalError"));  // a local run past its buffer: a caller bug
      std::vector<float> more(10);
      const auto [type2, what2] = caught([&] { set.read("param", identity_map(10), more); });
      QCOMPARE(q(type2), QString("FormatError"));
      QVERIFY2(q(what2).contains("no shard holds elements [8, 10) of param"), qPrintable(q(what2)));
    }
    {
      const auto [type, what] = caught([&] { ShardSet set(sd, m, 6); });
      QCOMPARE(q(type), QString("FormatError"));
      QVERIFY2(q(what).contains("shard-00001.bin: holds elements up to 8, but the model has 6"),
               qPrintable(q(what)));
    }
    m.shards[1] = write(1, 4, 6);  // rank 1's shard from another run (another step count)
    const auto [type, what] = caught([&] { ShardSet set(sd, m, 8); });
    QCOMPARE(q(type), QString("FormatError"));
    QVERIFY2(q(what).contains("shard-00001.bin: its training position differs"),
             qPrintable(q(what)));
  }

  void cleanupTestCase() {
    qInfo("worst relative difference after resharded resume: MLP %.3g, GPT %.3g", worst_mlp_,
          worst_gpt_);
  }
};

QTEST_GUILESS_MAIN(TestResharding)
#include "tst_resharding.moc"
