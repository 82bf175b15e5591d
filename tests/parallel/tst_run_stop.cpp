// Stopping a running threads job (RankRunOptions::stop, the app's Stop button): a ZeRO-2 job on 4
// ranks (the Fashion-MNIST MLP) and a pp 2 x tp 2 x dp 2 job (the tiny GPT), each asked to stop
// from another thread once the first step events arrive, end normally on every rank after the same
// number of steps, fewer than configured: stopped_early with the documented reason, no final
// evaluation, a finished job state and a report from every rank, and the same parameters on every
// rank, equal bit for bit to an uninterrupted run of the same job cut after as many steps
// (OptimizeInput::max_steps). A stop requested before the start trains nothing.
#include <QtTest>

#include <chrono>
#include <thread>

#include "engine/hybrid/hybrid_optimizer.h"
#include "engine/job/build.h"
#include "engine/run/rank_runner.h"
#include "engine/sharding/sharded_options_from_job.h"
#include "engine/train/stop_request.h"
#include "tests/parallel/parallel_test_util.h"
#include "tests/parallel/recording_sink.h"

using namespace shardlab;
using namespace shardlab::ptest;

namespace {

constexpr int64_t kSteps = 2000;  // far more than a stopped run reaches

// Shorter than the suites' 60 s: ranks that disagreed about the stop would wait in a collective.
constexpr double kTimeoutS = 20;

CommOptions comm_options() {
  CommOptions o;
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(kTimeoutS * 1000));
  return o;
}

JobSpec zero2_job() {
  JobSpec j = mlp_job("zero2", 4, "adam");
  j.train.steps = kSteps;
  j.train.log_every = 1000;
  j.train.eval_every = 0;
  j.parallel.timeout_s = kTimeoutS;
  return j;
}

// pp 2 x tp 2 x dp 2 with 1F1B over 4 micro-batches and ZeRO-1 (resources/jobs/gpt-3d.json's
// layout) on the tiny GPT.
JobSpec hybrid_job() {
  JobSpec j = gpt_job("zero1", 8, corpus_vocab());
  j.train.steps = kSteps;
  j.train.batch_size = 2 * 2 * 4;
  j.train.log_every = 1000;
  j.train.eval_every = 0;
  set_grid(j, {.pp = 2, .tp = 2, .dp = 2, .micro_batches = 4, .schedule = "1f1b"});
  j.parallel.timeout_s = kTimeoutS;
  return j;
}

struct StoppedRun {
  std::vector<ParallelRunResult> ranks;  // every rank's run_rank() result
  std::vector<int64_t> logged;           // rank 0's progress lines (steps)
  RecordingSink sink;
};

// Runs `job` on every rank with `stop`; `request_after_first_step`: another thread requests the
// stop once the first StepEvent arrives (otherwise the caller has requested it already).
void run_stopped(const JobSpec& job, const Datasets& data, StopRequest& stop,
                 bool request_after_first_step, StoppedRun& out) {
  const int n = static_cast<int>(job.parallel.world_size);
  out.ranks.assign(static_cast<size_t>(n), {});
  RankRunOptions ro;
  ro.stop = &stop;
  ro.telemetry = [&out](int) -> telemetry::TelemetrySink* { return &out.sink; };
  ro.callbacks.on_log = [&out](const StepInfo& i) { out.logged.push_back(i.step); };
  std::thread stopper;
  if (request_after_first_step)
    stopper = std::thread([&] {
      // Requested even when no step shows up, so a broken run still ends (and fails below).
      out.sink.wait_for_step(std::chrono::seconds(60));
      stop.request();
    });
  try {
    CommOptions co = comm_options();
    co.sink = with_comm_telemetry(make_comm_totals(job.parallel, n), ro.telemetry, job.parallel, n);
    run_threads(n, co, [&](Communicator& c) {
      out.ranks[static_cast<size_t>(c.rank())] = run_rank(job, c, data, ro);
    });
  } catch (...) {
    if (stopper.joinable()) {
      stop.request();
      stopper.join();
    }
    throw;
  }
  if (stopper.joinable()) stopper.join();
}

// The parameters after `steps` steps of an uninterrupted run of `job` (optimize with max_steps).
template <class Opt>
std::vector<float> params_after(const JobSpec& job, const Datasets& data, int64_t steps) {
  std::vector<float> out;
  run_threads(static_cast<int>(job.parallel.world_size), comm_options(), [&](Communicator& c) {
    auto opt = Opt::create(c, sharded_options(job));
    OptimizeInput in;
    in.train = data.train.get();
    in.max_steps = steps;
    TrainResult r = opt->optimize(in);
    if (c.rank() == 0) out = std::move(r.params);
  });
  return out;
}

std::string stop_reason(int64_t n) {
  return "stopped at the user's request after " + std::to_string(n) + " steps";
}

}  // namespace

class TestRunStop : public QObject {
  Q_OBJECT

 private:
  // What every stopped run must show; returns the agreed step count.
  int64_t check_stopped(const JobSpec& job, const StopRequest& stop, const StoppedRun& run) {
    const int n = static_cast<int>(job.parallel.world_size);
    [&] { QVERIFY(stop.requested()); }();
    const int64_t at = stop.stop_at();
    qInfo("stopped after %lld of %lld steps", static_cast<long long>(at),
          static_cast<long long>(job.train.steps));
    const TrainResult& r0 = run.ranks[0].result;
    for (int r = 0; r < n; ++r) {
      const ParallelRunResult& pr = run.ranks[static_cast<size_t>(r)];
      const TrainResult& rr = pr.result;
      const QString who = QString("rank %1: ").arg(r);
      [&] {
        QVERIFY2(rr.steps == at,
                 qPrintable(who + QString("%1 steps, agreed %2").arg(rr.steps).arg(at)));
        QVERIFY2(rr.stopped_early, qPrintable(who + "not stopped_early"));
        QCOMPARE(qs(rr.stop_reason), qs(stop_reason(at)));
        QCOMPARE(static_cast<int64_t>(rr.losses.size()), at);
        QVERIFY2(rr.evals.empty(), qPrintable(who + "evaluated a stopped run"));
        QVERIFY2(bit_equal(rr.params, r0.params), qPrintable(who + "params differ from rank 0's"));
        QVERIFY2(rr.losses == r0.losses, qPrintable(who + "losses differ from rank 0's"));
        QCOMPARE(static_cast<int>(pr.ranks.size()), n);
        // The job ended normally on this rank: finished, never failed; one StepEvent a step.
        bool finished = false, failed = false;
        int64_t steps = 0;
        for (const telemetry::Event& e : run.sink.of_rank(r)) {
          if (const auto* s = std::get_if<telemetry::JobStateEvent>(&e.payload)) {
            finished |= s->state == telemetry::JobState::finished;
            failed |= s->state == telemetry::JobState::failed;
          }
          if (std::holds_alternative<telemetry::StepEvent>(e.payload)) ++steps;
        }
        QVERIFY2(finished && !failed, qPrintable(who + "job state not finished"));
        QCOMPARE(steps, at);
      }();
      if (QTest::currentTestFailed()) return at;
    }
    return at;
  }

 private slots:
  void zero2_stops_every_rank_together() {
    if (!have_fashion_mnist()) QSKIP(kNoFashionMnist);
    const JobSpec job = zero2_job();
    StopRequest stop;
    StoppedRun run;
    run_stopped(job, mnist_data(), stop, true, run);
    const int64_t at = check_stopped(job, stop, run);
    if (QTest::currentTestFailed()) return;
    QVERIFY2(at >= 1 && at < kSteps, qPrintable(QString("stopped after %1 steps").arg(at)));
    // The end-of-run progress line is that of the last step done.
    QVERIFY(!run.logged.empty());
    QCOMPARE(run.logged.back(), at);
    const std::vector<float> ref = params_after<ShardedOptimizer>(job, mnist_data(), at);
    QVERIFY2(bit_equal(run.ranks[0].result.params, ref),
             "a stopped run differs from an uninterrupted one cut after as many steps");
  }

  void zero2_stop_before_start_trains_nothing() {
    if (!have_fashion_mnist()) QSKIP(kNoFashionMnist);
    const JobSpec job = zero2_job();
    StopRequest stop;
    stop.request();
    StoppedRun run;
    run_stopped(job, mnist_data(), stop, false, run);
    QCOMPARE(check_stopped(job, stop, run), int64_t{0});
    if (QTest::currentTestFailed()) return;
    std::unique_ptr<Model> init = build_model(job.model);
    QVERIFY(bit_equal(run.ranks[0].result.params,
                      std::vector<float>(init->params().begin(), init->params().end())));
    QVERIFY(run.logged.empty());
  }

  void hybrid_stops_every_rank_together() {
    const JobSpec job = hybrid_job();
    StopRequest stop;
    StoppedRun run;
    run_stopped(job, corpus_data(), stop, true, run);
    const int64_t at = check_stopped(job, stop, run);
    if (QTest::currentTestFailed()) return;
    QVERIFY2(at >= 1 && at < kSteps, qPrintable(QString("stopped after %1 steps").arg(at)));
    QVERIFY(!run.logged.empty());
    QCOMPARE(run.logged.back(), at);
    const std::vector<float> ref = params_after<HybridShardedOptimizer>(job, corpus_data(), at);
    QVERIFY2(bit_equal(run.ranks[0].result.params, ref),
             "a stopped run differs from an uninterrupted one cut after as many steps");
  }
};

QTEST_GUILESS_MAIN(TestRunStop)
#include "tst_run_stop.moc"
