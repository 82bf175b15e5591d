// The per-rank memory view, offscreen: its predictions are the planner's own figures (computed
// here by independent planner calls), ZeRO-2 and tp=4 show their savings, an invalid job shows the
// engine's message and no prediction, measured figures come from a RunModel, and the chart holds
// two stacked bars per rank.
#include <QtTest>

#include <QBarSet>
#include <QStackedBarSeries>

#include "engine/job/job_spec.h"
#include "engine/plan/memory/planner.h"
#include "engine/topology/topology.h"
#include "gui/memory_view.h"
#include "net/run_model.h"

using namespace shardlab;
using namespace shardlab::gui;
using C = MemCategory;

namespace {

JobSpec mlp_job(const std::string& strategy, int world) {
  JobSpec job =
      load_job(QString(SHARDLAB_SOURCE_DIR "/resources/jobs/fashion_mlp.json").toStdString());
  // Psi = 234,612, a multiple of 4, so ZeRO's flat-buffer padding adds nothing to params.
  job.model.mlp.hidden = {256, 126};
  job.parallel.strategy = strategy;
  job.parallel.world_size = world;
  return job;
}

// A small GPT job (chars corpus, vocab 96, context 16, width 32, 2 layers, 4 heads).
JobSpec gpt_job(const std::string& strategy, int world, int pp, int tp, int dp) {
  JobSpec job = load_job(QString(SHARDLAB_SOURCE_DIR "/resources/jobs/gpt-3d.json").toStdString());
  job.model.gpt.vocab_size = 96;
  job.model.gpt.context = 16;
  job.model.gpt.width = 32;
  job.model.gpt.layers = 2;
  job.model.gpt.heads = 4;
  job.parallel.strategy = strategy;
  job.parallel.world_size = world;
  job.parallel.pp = pp;
  job.parallel.tp = tp;
  job.parallel.dp = dp;
  if (pp == 1) {  // the pipeline-only fields must keep their defaults
    job.parallel.schedule = ParallelConfig{}.schedule;
    job.parallel.pp_partition = ParallelConfig{}.pp_partition;
  }
  if (pp == 1 && tp == 1) job.parallel.micro_batches = 1;
  return job;
}

}  // namespace

class TestMemoryView : public QObject {
  Q_OBJECT
 private slots:
  void zero2SavesGradsAndStateOverDdp() {
    const JobSpec ddp = mlp_job("ddp", 4), zero2 = mlp_job("zero2", 4);
    MemoryViewModel a, b;
    a.setJob(ddp);
    b.setJob(zero2);
    QVERIFY2(a.error().isEmpty(), qPrintable(a.error()));
    QVERIFY2(b.error().isEmpty(), qPrintable(b.error()));
    QCOMPARE(a.ranks(), 4);
    QCOMPARE(b.ranks(), 4);
    const ParamLayout layout = model_layout(ddp.model);
    const MemoryPlan pa = plan_memory(layout, ddp.optimizer, ddp.parallel, 4);
    const MemoryPlan pb = plan_memory(layout, zero2.optimizer, zero2.parallel, 4);
    QCOMPARE(layout.size() % 4, int64_t{0});
    for (int r = 0; r < 4; ++r) {
      for (C c : {C::params, C::grads, C::optimizer_state}) {
        QCOMPARE(a.predicted(r, c), pa.steady[c]);
        QCOMPARE(b.predicted(r, c), pb.steady[c]);
      }
      QVERIFY(b.predicted(r, C::optimizer_state) < a.predicted(r, C::optimizer_state));
      QVERIFY(b.predicted(r, C::grads) < a.predicted(r, C::grads));
      // The flat buffer pads Psi to a multiple of N; with this model that is Psi itself.
      QCOMPARE(b.predicted(r, C::params), a.predicted(r, C::params));
      QCOMPARE(a.predicted(r, C::activations), int64_t{0});
    }
    QCOMPARE(a.predicted(4, C::params), int64_t{0});  // out of range
  }

  void hybridRanksAreThePlannersPerRank() {
    const JobSpec job = gpt_job("zero1", 8, 2, 2, 2);
    MemoryViewModel m;
    m.setJob(job);
    QVERIFY2(m.error().isEmpty(), qPrintable(m.error()));
    QVERIFY(m.note().isEmpty());
    QCOMPARE(m.ranks(), 8);
    for (int r = 0; r < 8; ++r) {
      const MemoryPlan plan = plan_memory_hybrid(job.model, job.optimizer, job.parallel, 8, r);
      for (C c : {C::params, C::grads, C::optimizer_state})
        QCOMPARE(m.predicted(r, c), plan.steady[c]);
    }
    const Topology topo = Topology::make({2, 2, 2}, 8);
    const int stage0 = topo.rank({.pp = 0, .tp = 0, .dp = 0});
    const int stage1 = topo.rank({.pp = 1, .tp = 0, .dp = 0});
    QVERIFY(m.predicted(stage0, C::params) != m.predicted(stage1, C::params));
  }

  void tp4HoldsFewerParamsThanTp1() {
    MemoryViewModel tp1, tp4;
    tp1.setJob(gpt_job("ddp", 4, 1, 1, 4));
    tp4.setJob(gpt_job("ddp", 4, 1, 4, 1));
    QVERIFY2(tp1.error().isEmpty(), qPrintable(tp1.error()));
    QVERIFY2(tp4.error().isEmpty(), qPrintable(tp4.error()));
    for (int r = 0; r < 4; ++r) QVERIFY(tp4.predicted(r, C::params) < tp1.predicted(r, C::params));
  }

  void unknownVocabularyUsesAPlaceholder() {
    JobSpec job = gpt_job("zero1", 8, 2, 2, 2);
    job.model.gpt.vocab_size = 0;
    MemoryViewModel m;
    m.setJob(job);
    QVERIFY2(m.error().isEmpty(), qPrintable(m.error()));
    QVERIFY(m.note().contains("96"));
    job.model.gpt.vocab_size = MemoryViewModel::kPlaceholderVocab;
    const MemoryPlan plan = plan_memory_hybrid(job.model, job.optimizer, job.parallel, 8, 3);
    QCOMPARE(m.predicted(3, C::params), plan.steady[C::params]);
  }

  void invalidJobShowsTheProblemAndNoPrediction() {
    MemoryViewModel m;
    m.setJob(gpt_job("zero1", 8, 2, 2, 2));
    QVERIFY(m.hasPrediction());
    m.setJob(gpt_job("ddp", 3, 1, 3, 1));  // 3 does not divide 4 heads
    QVERIFY(!m.hasPrediction());
    QVERIFY2(m.error().contains("parallel.tp"), qPrintable(m.error()));
    QCOMPARE(m.ranks(), 0);
    QCOMPARE(m.predicted(0, C::params), int64_t{0});

    MemoryView view;
    view.setJob(gpt_job("ddp", 3, 1, 3, 1));
    QVERIFY(view.statusText().contains("parallel.tp"));
  }

  void measuredComesFromTheRunModel() {
    telemetry::MemoryEvent mem;
    mem.current[static_cast<size_t>(C::params)] = 4000;
    mem.current[static_cast<size_t>(C::grads)] = 1000;
    mem.peak = mem.current;
    net::RunModel run;
    run.add(net::Message{telemetry::Event{.rank = 1, .seq = 0, .time = 1.0, .payload = mem}});
    MemoryViewModel m;
    m.setJob(mlp_job("zero2", 4));
    m.setMeasured(run);
    QCOMPARE(m.measured(1, C::grads), std::optional<int64_t>(1000));
    QCOMPARE(m.measured(1, C::params), std::optional<int64_t>(4000));
    QVERIFY(!m.measured(0, C::grads).has_value());
    QCOMPARE(m.ranks(), 4);

    MemoryView view;
    view.setJob(mlp_job("zero2", 4));
    view.setMeasured(run);
    const QList<QBarSet*> sets = view.series()->barSets();
    QCOMPARE(sets.size(), 4);
    QCOMPARE(sets[1]->count(), 8);
    QVERIFY(sets[1]->at(3) > 0);    // rank 1 measured grads
    QCOMPARE(sets[1]->at(1), 0.0);  // rank 0 measured: nothing reported
  }

  void twoStackedBarsPerRank() {
    MemoryView view;
    view.setJob(gpt_job("zero1", 8, 2, 2, 2));
    QCOMPARE(view.series()->barSets().size(), 4);
    for (QBarSet* set : view.series()->barSets()) QCOMPARE(set->count(), 16);
    QVERIFY(!view.statusText().contains("first"));
    // Rank 0's planned params bar is the planner's figure in the axis unit (non-zero).
    QVERIFY(view.series()->barSets()[0]->at(0) > 0);

    JobSpec big = mlp_job("ddp", 100);
    big.train.batch_size = 200;  // divisible by the world size
    view.setJob(big);
    QVERIFY2(view.model().error().isEmpty(), qPrintable(view.model().error()));
    QCOMPARE(view.model().ranks(), 100);
    QCOMPARE(view.series()->barSets().size(), 4);
    for (QBarSet* set : view.series()->barSets())
      QCOMPARE(set->count(), 2 * MemoryView::kMaxDrawnRanks);
    QVERIFY2(view.statusText().contains("first 64 of 100 ranks"), qPrintable(view.statusText()));
  }

  // The categories' colours are the palette both front ends read (engine/telemetry/palette.h), the
  // web page's too: written out here.
  void categoryColoursAreTheSharedPalettes() {
    QCOMPARE(MemoryView::categoryColor(C::params), QColor(0x00, 0x72, 0xb2));
    QCOMPARE(MemoryView::categoryColor(C::grads), QColor(0xe6, 0x9f, 0x00));
    QCOMPARE(MemoryView::categoryColor(C::optimizer_state), QColor(0x00, 0x9e, 0x73));
    QCOMPARE(MemoryView::categoryColor(C::activations), QColor(0xcc, 0x79, 0xa7));
    QCOMPARE(MemoryView::categoryColor(C::comm), QColor(0x56, 0xb4, 0xe9));
  }
};

QTEST_MAIN(TestMemoryView)
#include "tst_memory_view.moc"
