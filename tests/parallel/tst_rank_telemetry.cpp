// What every rank of a threads job publishes about its compute and its evaluations
// (RankRunOptions::telemetry): for every strategy (ddp, zero1, zero2, fsdp on 4 ranks, with
// gradient accumulation, on the Fashion-MNIST MLP) and a pp 2 x tp 1 x dp 2 job with 2
// micro-batches (the tiny GPT; also interleaved with 2 chunks a stage and 4 micro-batches), each
// rank publishes per step a forward and a backward PhaseEvent for each of its micro-batches and
// chunks (on its virtual stage: chunk * pp + its pipeline stage, 0 for the 1-D strategies) and
// exactly one
// optimizer PhaseEvent (micro-batch -1) after them, every span ordered and inside the step (after
// the previous StepEvent, before this one); and an EvalEvent at every train.eval_every steps and at
// the end, the same figures on every rank, equal to the run's result.
#include <QtTest>

#include <map>
#include <tuple>
#include <utility>

#include "engine/job/build.h"
#include "engine/run/rank_runner.h"
#include "tests/parallel/parallel_test_util.h"
#include "tests/parallel/recording_sink.h"

using namespace shardlab;
using namespace shardlab::ptest;

namespace {

constexpr int64_t kSteps = 4;
constexpr int64_t kEvalEvery = 2;

JobSpec one_d_job(const std::string& strategy, int64_t accumulation) {
  JobSpec j = mlp_job(strategy, 4, "adam");
  j.train.steps = kSteps;
  j.train.eval_every = kEvalEvery;
  j.train.accumulation_steps = accumulation;
  return j;
}

// pp 2 x tp 1 x dp 2, 2 micro-batches of 2 samples per replica.
JobSpec hybrid_job() {
  JobSpec j = gpt_job("zero1", 4, corpus_vocab());
  j.train.steps = kSteps;
  j.train.eval_every = kEvalEvery;
  j.train.batch_size = 2 * 2 * 2;
  set_grid(j, {.pp = 2, .tp = 1, .dp = 2, .micro_batches = 2});
  return j;
}

// pp 2 x tp 1 x dp 1, interleaved 1F1B with 2 chunks a stage, 4 micro-batches of 2 samples.
JobSpec interleaved_job() {
  JobSpec j = gpt_job("ddp", 2, corpus_vocab());
  j.train.steps = kSteps;
  j.train.eval_every = kEvalEvery;
  j.train.batch_size = 2 * 4;
  set_grid(j, {.pp = 2, .tp = 1, .dp = 1, .micro_batches = 4});
  j.parallel.schedule = "interleaved";
  j.parallel.pp_chunks = 2;
  return j;
}

QString phase_name(const telemetry::PhaseEvent& p) {
  return QString("%1 of micro-batch %2 (virtual stage %3)")
      .arg(telemetry::to_string(p.phase))
      .arg(p.micro_batch)
      .arg(p.stage);
}

}  // namespace

class TestRankTelemetry : public QObject {
  Q_OBJECT

 private:
  // Runs `job` on every rank with one recording sink and checks what each rank published.
  void check(const JobSpec& job, const Datasets& data, int64_t micro_batches) {
    const int n = static_cast<int>(job.parallel.world_size);
    const int pp = static_cast<int>(job.parallel.pp);
    const int chunks = static_cast<int>(job.parallel.pp_chunks);
    RecordingSink sink;
    RankRunOptions ro;
    ro.telemetry = [&sink](int) -> telemetry::TelemetrySink* { return &sink; };
    std::vector<ParallelRunResult> runs(static_cast<size_t>(n));
    CommOptions co = test_comm_options();
    co.sink = with_comm_telemetry(make_comm_totals(job.parallel, n), ro.telemetry, job.parallel, n);
    run_threads(n, co, [&](Communicator& c) {
      runs[static_cast<size_t>(c.rank())] = run_rank(job, c, data, ro);
    });
    const std::vector<EvalResult>& evals0 = runs[0].result.evals;
    // Evaluations at every eval_every steps and at the end.
    QCOMPARE(static_cast<int64_t>(evals0.size()), kSteps / kEvalEvery);
    for (int r = 0; r < n; ++r) {
      const QString who = QString("rank %1: ").arg(r);
      const int stage = runs[0].ranks[static_cast<size_t>(r)].stage;
      double step_begin = -1;  // when the step could have begun: the previous step's event
      std::vector<telemetry::PhaseEvent> phases;
      std::vector<telemetry::EvalEvent> evals;
      int64_t steps = 0;
      for (const telemetry::Event& e : sink.of_rank(r)) {
        if (const auto* s = std::get_if<telemetry::JobStateEvent>(&e.payload)) {
          if (s->state == telemetry::JobState::running) step_begin = e.time;
        } else if (const auto* p = std::get_if<telemetry::PhaseEvent>(&e.payload)) {
          phases.push_back(*p);
          QVERIFY2(e.time == p->end, qPrintable(who + "event time is not the span's end"));
        } else if (const auto* ev = std::get_if<telemetry::EvalEvent>(&e.payload)) {
          evals.push_back(*ev);
        } else if (const auto* st = std::get_if<telemetry::StepEvent>(&e.payload)) {
          ++steps;
          QCOMPARE(st->step, steps);
          const QString at = who + QString("step %1: ").arg(steps);
          QVERIFY2(step_begin > 0, qPrintable(at + "no running state before it"));
          // (phase, micro-batch, virtual stage) -> its span; each exactly once. The optimizer's
          // stage is the pipeline stage; a forward's or backward's is chunk * pp + stage.
          std::map<std::tuple<int, int, int>, telemetry::PhaseEvent> seen;
          for (const telemetry::PhaseEvent& p : phases) {
            const bool opt_phase = p.phase == telemetry::Phase::optimizer;
            const bool stage_ok =
                opt_phase ? p.stage == stage
                          : p.stage % pp == stage && p.stage >= 0 && p.stage / pp < chunks;
            QVERIFY2(stage_ok,
                     qPrintable(at + phase_name(p) +
                                QString(" on the wrong stage (this rank's is %1)").arg(stage)));
            QVERIFY2(p.start <= p.end, qPrintable(at + phase_name(p) + " ends before it starts"));
            QVERIFY2(p.start >= step_begin && p.end <= e.time,
                     qPrintable(at + phase_name(p) + " outside the step"));
            const bool inserted =
                seen.emplace(std::make_tuple(static_cast<int>(p.phase), p.micro_batch, p.stage), p)
                    .second;
            QVERIFY2(inserted, qPrintable(at + phase_name(p) + " twice"));
          }
          QCOMPARE(static_cast<int64_t>(seen.size()), 2 * micro_batches * chunks + 1);
          const auto opt = seen.find({static_cast<int>(telemetry::Phase::optimizer), -1, stage});
          QVERIFY2(opt != seen.end(), qPrintable(at + "no optimizer phase"));
          for (int64_t m = 0; m < micro_batches; ++m)
            for (int c = 0; c < chunks; ++c) {
              const int vs = c * pp + stage;
              const auto f = seen.find({static_cast<int>(telemetry::Phase::forward), int(m), vs});
              const auto b = seen.find({static_cast<int>(telemetry::Phase::backward), int(m), vs});
              const QString mb = QString("micro-batch %1 on virtual stage %2").arg(m).arg(vs);
              QVERIFY2(f != seen.end() && b != seen.end(), qPrintable(at + mb + " lacks a phase"));
              QVERIFY2(f->second.end <= b->second.start,
                       qPrintable(at + mb + ": backward before forward"));
              QVERIFY2(b->second.end <= opt->second.start,
                       qPrintable(at + mb + ": backward after the update"));
            }
          phases.clear();
          step_begin = e.time;
        }
      }
      QCOMPARE(steps, kSteps);
      QVERIFY2(phases.empty(), qPrintable(who + "phases after the last step"));
      // The evaluations: this rank's result's, and the same figures as rank 0's.
      const std::vector<EvalResult>& mine = runs[static_cast<size_t>(r)].result.evals;
      QCOMPARE(evals.size(), mine.size());
      QCOMPARE(evals.size(), evals0.size());
      for (size_t k = 0; k < evals.size(); ++k) {
        QCOMPARE(evals[k].step, static_cast<int64_t>(k + 1) * kEvalEvery);
        QCOMPARE(evals[k].step, mine[k].step);
        QCOMPARE(evals[k].loss, mine[k].loss);
        QCOMPARE(evals[k].accuracy, mine[k].accuracy);
        QCOMPARE(evals[k].samples, mine[k].samples);
        QCOMPARE(evals[k].loss, evals0[k].loss);
        QCOMPARE(evals[k].accuracy, evals0[k].accuracy);
      }
    }
  }

 private slots:
  void one_d_strategies_data() {
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("accumulation");
    QTest::newRow("zero1 m2") << "zero1" << 2;
    QTest::newRow("ddp m1") << "ddp" << 1;
    QTest::newRow("zero2 m3") << "zero2" << 3;
    QTest::newRow("fsdp m2") << "fsdp" << 2;
  }

  void one_d_strategies() {
    if (!have_fashion_mnist()) QSKIP(kNoFashionMnist);
    QFETCH(QString, strategy);
    QFETCH(int, accumulation);
    check(one_d_job(strategy.toStdString(), accumulation), mnist_data(), accumulation);
  }

  void hybrid_pp2_dp2() { check(hybrid_job(), corpus_data(), 2); }
  void interleaved_pp2_v2() { check(interleaved_job(), corpus_data(), 4); }
};

QTEST_GUILESS_MAIN(TestRankTelemetry)
#include "tst_rank_telemetry.moc"
