// 3D parallelism equals one process: for the GPT character model, every pp x tp x dp layout with
// pp * tp * dp <= 8 that the model allows (4 heads: tp in {1, 2, 4}; 4 blocks: pp in {1, 2, 4}),
// with both pipeline schedules where pp > 1 and the data-parallel strategies ddp, zero1 and zero2
// in turn, trains 5 Adam steps on threads and ends with the single-process run's parameters
// (build_training + Trainer, never the code under test); every step's loss and gradient norm
// (each series relative to its largest value) and the final evaluation match likewise. "Match"
// is judged by engine/job/equivalence.h: within a small multiple of the job's noise floor (the
// single-process run's own spread when its batch is cut into micro-batches or reversed), because
// Adam turns last-bit differences of gradient elements that cancel to within eps of zero into
// parameter differences of a fraction of lr, so a fixed threshold holds on one BLAS kernel and
// fails on another. Each rank's ledger equals the planner's per-rank plan, and GPipe holds more
// activations on the first stage than 1F1B. Bad layouts fail naming the field.
#include <QtTest>

#include "engine/hybrid/hybrid_optimizer.h"
#include "engine/job/build.h"
#include "engine/run/rank_runner.h"
#include "engine/sharding/sharded_options_from_job.h"
#include "tests/common/caught.h"
#include "tests/parallel/parallel_test_util.h"

using namespace shardlab;
using namespace shardlab::ptest;

namespace {

struct Layout {
  int pp, tp, dp;
  std::string schedule;
  std::string strategy;
  int64_t micro_batches;
  std::string optimizer = "adam";
  double clip = 0;  // train.clip_grad_norm
  std::string partition = "uniform";
  int64_t chunks = 1;  // parallel.pp_chunks (interleaved)
};

// Rows after the sweep: what it leaves out.
constexpr size_t kExtraRows = 11;

std::vector<Layout> all_layouts() {
  std::vector<Layout> out;
  const std::vector<std::string> strategies{"ddp", "zero1", "zero2"};
  int k = 0;
  for (int pp : {1, 2, 4})
    for (int tp : {1, 2, 4})
      for (int dp = 1; pp * tp * dp <= 8; ++dp)
        for (const std::string& schedule : {std::string("1f1b"), std::string("gpipe")}) {
          if (pp == 1 && schedule == "gpipe") continue;  // one stage: the schedules coincide
          // pp > 1: 4 micro-batches (1F1B reaches its steady state on 2 and 4 stages); tp alone:
          // 2 (micro-batching without a pipeline); otherwise 1.
          const int64_t m = pp > 1 ? 4 : (tp > 1 ? 2 : 1);
          out.push_back({pp, tp, dp, schedule, strategies[static_cast<size_t>(k++) % 3], m});
        }
  // What the sweep above leaves out: every strategy on one 3D layout with SGD and a clip that
  // binds (so the global norm must count every element exactly once); fewer micro-batches than
  // stages; the balanced partition; three stages over four blocks (2, 1, 1) with tp.
  for (const std::string& strategy : strategies)
    out.push_back({2, 2, 2, "1f1b", strategy, 2, "sgd", 0.5});
  out.push_back({4, 1, 1, "1f1b", "zero1", 2, "sgd", 0.5});
  out.push_back({4, 1, 2, "gpipe", "zero2", 1});
  out.push_back({2, 1, 2, "1f1b", "ddp", 4, "adam", 0, "balanced"});
  out.push_back({3, 2, 1, "1f1b", "zero1", 3, "sgd", 0.5});
  // Interleaved 1F1B, 2 chunks a stage (4 virtual stages over the 4 blocks): alone, in 3D with a
  // binding clip, with ZeRO-2 over dp and the balanced partition, and with 3 groups of micro-
  // batches.
  out.push_back({2, 1, 1, "interleaved", "ddp", 4, "adam", 0, "uniform", 2});
  out.push_back({2, 2, 2, "interleaved", "zero1", 2, "sgd", 0.5, "uniform", 2});
  out.push_back({2, 1, 2, "interleaved", "zero2", 4, "adam", 0, "balanced", 2});
  out.push_back({2, 1, 1, "interleaved", "zero2", 6, "adam", 0, "uniform", 2});
  return out;
}

QString name_of(const Layout& l) {
  return QString("pp%1_tp%2_dp%3_%4%5_%6_m%7%8%9%10")
      .arg(l.pp)
      .arg(l.tp)
      .arg(l.dp)
      .arg(qs(l.schedule))
      .arg(l.chunks > 1 ? QString("_v%1").arg(l.chunks) : QString())
      .arg(qs(l.strategy))
      .arg(l.micro_batches)
      .arg(l.optimizer == "adam" ? QString() : "_" + qs(l.optimizer))
      .arg(l.clip > 0 ? QString("_clip%1").arg(l.clip) : QString())
      .arg(l.partition == "uniform" ? QString() : "_" + qs(l.partition));
}

// The tiny GPT with 4 heads; the batch is 2 samples per micro-batch and replica.
JobSpec job_for(const Layout& l, int64_t vocab) {
  JobSpec j = gpt_job(l.strategy, l.pp * l.tp * l.dp, vocab);
  j.model.gpt.heads = 4;
  j.train.steps = 5;
  j.train.batch_size = 2 * l.dp * l.micro_batches;
  j.train.eval_batches = 1;
  j.parallel.pp = l.pp;
  j.parallel.tp = l.tp;
  j.parallel.dp = l.dp;
  j.parallel.micro_batches = l.micro_batches;
  j.parallel.schedule = l.schedule;
  j.parallel.pp_chunks = l.chunks;
  j.parallel.pp_partition = l.partition;
  j.optimizer = optimizer_config(l.optimizer);
  if (l.optimizer == "sgd") j.optimizer.lr = 0.5;  // large steps: differences would show
  j.train.clip_grad_norm = l.clip;
  return j;
}

// Every rank's result; `norms` gets rank 0's pre-clip gradient norm of every step.
std::vector<ParallelRunResult> run_every_rank(const JobSpec& job,
                                              std::vector<double>* norms = nullptr) {
  const int n = static_cast<int>(job.parallel.world_size);
  std::vector<ParallelRunResult> out(static_cast<size_t>(n));
  RankRunOptions ro;
  if (norms) ro.callbacks.on_step = [norms](const StepInfo& i) { norms->push_back(i.grad_norm); };
  run_threads(n, test_comm_options(), [&](Communicator& c) {
    out[static_cast<size_t>(c.rank())] = run_rank(job, c, corpus_data(), ro);
  });
  return out;
}

}  // namespace

class TestHybridEquivalence : public QObject {
  Q_OBJECT

 private slots:
  void sweep_covers_every_layout() {
    // 24 layouts (pp, tp, dp) with product <= 8; the 10 with two stages or more run both
    // schedules (20 rows); kExtraRows rows after them, 4 of them interleaved.
    int layouts = 0, piped = 0, interleaved = 0;
    const auto all = all_layouts();
    for (size_t i = 0; i + kExtraRows < all.size(); ++i) {
      if (all[i].schedule == "1f1b") ++layouts;
      if (all[i].pp > 1) ++piped;
    }
    for (const Layout& l : all) interleaved += l.schedule == "interleaved" && l.chunks == 2 ? 1 : 0;
    QCOMPARE(all.size(), size_t{24 + 10} + kExtraRows);
    QCOMPARE(interleaved, 4);
    QCOMPARE(layouts, 24);
    QCOMPARE(piped, 20);
    // The corpus's vocabulary does not split evenly over 4 tp ranks, so the uneven vocabulary
    // split is exercised.
    QVERIFY2(corpus_vocab() % 4 != 0, qPrintable(QString("vocab %1").arg(corpus_vocab())));
  }

  void equals_one_process_data() {
    QTest::addColumn<int>("index");
    const auto layouts = all_layouts();
    for (size_t i = 0; i < layouts.size(); ++i)
      QTest::newRow(qPrintable(name_of(layouts[i]))) << static_cast<int>(i);
  }

  void equals_one_process() {
    QFETCH(int, index);
    const Layout l = all_layouts()[static_cast<size_t>(index)];
    const JobSpec job = job_for(l, corpus_vocab());
    const Judged& judge = judged(job);
    const TrainResult& ref = judge.reference.result;
    const Tolerances& tol = judge.tol;
    std::string why;
    QVERIFY2(floor_is_consistent(judge.floor, &why), why.c_str());
    // The reference trained well beyond the tolerance (a run that never stepped cannot pass).
    const double moved = training_movement(judge.reference);
    QVERIFY2(moved > kMinMovement * tol.params,
             qPrintable(
                 QString("reference moved by only %1 (tolerance %2)").arg(moved).arg(tol.params)));
    std::vector<double> norms;
    const std::vector<ParallelRunResult> runs = run_every_rank(job, &norms);
    const TrainResult& r0 = runs[0].result;
    const double d = max_rel_diff(r0.params, ref.params);
    qInfo("params: max rel diff %.3g, tolerance %.3g (%s)", d, tol.params,
          describe(judge.floor).c_str());
    // Every step's global gradient norm (before clipping): each element counted exactly once.
    QCOMPARE(norms.size(), judge.reference.grad_norms.size());
    const double dn = max_rel_diff(norms, judge.reference.grad_norms);
    QVERIFY2(
        dn <= tol.grad_norms,
        qPrintable(
            QString("grad norms: max rel diff %1 > tolerance %2").arg(dn).arg(tol.grad_norms)));
    // Parameters, reassembled from every stage and tp slice.
    QVERIFY2(d <= tol.params,
             qPrintable(QString("params: max rel diff %1 > tolerance %2").arg(d).arg(tol.params)));
    for (const ParallelRunResult& r : runs)
      QVERIFY2(bit_equal(r.result.params, r0.params), "ranks gathered different parameters");
    // Every step's loss.
    QCOMPARE(r0.losses.size(), ref.losses.size());
    const double dl = max_rel_diff(r0.losses, ref.losses);
    QVERIFY2(dl <= tol.losses,
             qPrintable(QString("losses: max rel diff %1 > tolerance %2").arg(dl).arg(tol.losses)));
    // The final evaluation ran through the pipeline.
    QVERIFY(!r0.evals.empty() && !ref.evals.empty());
    const double ea = r0.final_eval().loss, eb = ref.final_eval().loss;
    QVERIFY2(std::abs(ea - eb) <= tol.eval_loss * std::abs(eb),
             qPrintable(QString("eval loss %1 vs one process %2").arg(ea).arg(eb)));
    QCOMPARE(r0.final_eval().accuracy, ref.final_eval().accuracy);
    // What every rank holds at rest is what the planner predicts for that rank.
    for (const RankReport& rr : runs[0].ranks)
      for (MemCategory c : {MemCategory::params, MemCategory::grads, MemCategory::optimizer_state})
        QVERIFY2(rr.memory.current[c] == rr.plan.steady[c],
                 qPrintable(QString("rank %1 %2: ledger %3 bytes, plan %4")
                                .arg(rr.rank)
                                .arg(to_string(c))
                                .arg(rr.memory.current[c])
                                .arg(rr.plan.steady[c])));
  }

  void one_f_one_b_holds_fewer_activations() {
    // p = 2, m = 4: GPipe keeps all 4 micro-batches on stage 0, 1F1B at most 2.
    int64_t peak[2] = {0, 0};
    int i = 0;
    for (const char* schedule : {"gpipe", "1f1b"}) {
      const JobSpec job = job_for({2, 1, 1, schedule, "ddp", 4}, corpus_vocab());
      const auto runs = run_every_rank(job);
      peak[i++] = runs[0].ranks[0].memory.peak[MemCategory::activations];
    }
    QVERIFY2(peak[0] > peak[1],
             qPrintable(
                 QString("stage 0 peak activations: gpipe %1, 1f1b %2").arg(peak[0]).arg(peak[1])));
  }

  void bad_layouts_fail_naming_the_field() {
    const int64_t vocab = corpus_vocab();
    auto create_error = [&](JobSpec job) {
      std::pair<std::string, std::string> e;
      run_threads(
          static_cast<int>(job.parallel.world_size), test_comm_options(), [&](Communicator& c) {
            auto got =
                test::caught([&] { HybridShardedOptimizer::create(c, sharded_options(job)); });
            if (c.rank() == 0) e = got;
          });
      return e;
    };
    JobSpec tp3 = job_for({1, 2, 1, "1f1b", "ddp", 2}, vocab);
    tp3.parallel.tp = 3;
    tp3.parallel.world_size = 3;
    auto e = create_error(tp3);
    QCOMPARE(qs(e.first), QString("InvalidArgument"));
    QVERIFY2(e.second.find("parallel.tp") != std::string::npos, e.second.c_str());

    JobSpec stages = job_for({2, 1, 1, "1f1b", "ddp", 4}, vocab);
    stages.parallel.pp = 8;  // 4 blocks
    stages.parallel.world_size = 8;
    e = create_error(stages);
    QVERIFY2(e.second.find("parallel.pp") != std::string::npos, e.second.c_str());

    JobSpec fsdp = job_for({2, 1, 1, "1f1b", "ddp", 4}, vocab);
    fsdp.parallel.strategy = "fsdp";
    e = create_error(fsdp);
    QVERIFY2(e.second.find("parallel.strategy") != std::string::npos, e.second.c_str());

    JobSpec uneven = job_for({2, 1, 1, "1f1b", "ddp", 4}, vocab);
    uneven.parallel.micro_batches = 3;  // batch 8
    e = create_error(uneven);
    QVERIFY2(e.second.find("micro_batches") != std::string::npos, e.second.c_str());

    // Interleaved: 2 stages of 4 chunks are 8 virtual stages, the model has 4 blocks; 6
    // micro-batches in groups of 4 stages.
    JobSpec chunks = job_for({2, 1, 1, "interleaved", "ddp", 4, "adam", 0, "uniform", 4}, vocab);
    e = create_error(chunks);
    QVERIFY2(e.second.find("parallel.pp_chunks") != std::string::npos, e.second.c_str());
    JobSpec groups = job_for({4, 1, 1, "interleaved", "ddp", 6, "adam", 0, "uniform", 2}, vocab);
    groups.model.gpt.layers = 6;  // 8 blocks
    e = create_error(groups);
    QVERIFY2(e.second.find("parallel.micro_batches") != std::string::npos, e.second.c_str());
    JobSpec one = job_for({2, 1, 1, "interleaved", "ddp", 4, "adam", 0, "uniform", 1}, vocab);
    e = create_error(one);
    QVERIFY2(e.second.find("parallel.pp_chunks") != std::string::npos, e.second.c_str());
  }
};

QTEST_GUILESS_MAIN(TestHybridEquivalence)
#include "tst_hybrid_equivalence.moc"
