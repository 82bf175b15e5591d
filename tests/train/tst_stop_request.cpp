// StopRequest (engine/train/stop_request.h): the stop point is the newest step any rank has
// started, every rank stops there however skewed their progress, a request before any step stops
// them all at 0; and TrainerCallbacks::should_stop ends a single-process run between steps with
// its result, progress lines and evaluations as documented (no final evaluation).
#include <QtTest>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "engine/job/build.h"
#include "engine/job/job_spec.h"
#include "engine/job/overrides.h"
#include "engine/train/stop_request.h"
#include "engine/train/trainer.h"
#include "tests/common/data.h"

using namespace shardlab;
using shardlab::test::example_job;
using shardlab::test::have_fashion_mnist;
using shardlab::test::kNoFashionMnist;

namespace {

constexpr int64_t kRunaway = 1'000'000;  // a thread that never stops fails the test

struct Progress {
  int64_t stopped_at = -1;  // the steps_done should_stop returned true for
  int64_t started = 0;      // the newest step it started (1-based)
};

// A small single-process MLP job with evaluation data: 10 steps of batch 32.
JobSpec small_job(int64_t log_every, int64_t eval_every) {
  nlohmann::json doc = read_job_json(example_job("fashion_mlp.json"));
  doc.erase("parallel");
  for (const std::string& o :
       {std::string("model.mlp.hidden=[16]"), std::string("data.train_limit=320"),
        std::string("data.eval_limit=64"), std::string("train.steps=10"),
        std::string("train.batch_size=32"), std::string("train.eval_batches=1"),
        "train.log_every=" + std::to_string(log_every),
        "train.eval_every=" + std::to_string(eval_every)})
    apply_override(doc, o);
  return job_from_json(doc);
}

}  // namespace

class TestStopRequest : public QObject {
  Q_OBJECT

 private slots:
  void stop_point_is_newest_started_step() {
    StopRequest s;
    QVERIFY(!s.requested());
    QVERIFY(!s.should_stop(0));
    QVERIFY(!s.should_stop(1));  // rank A has started step 2
    QVERIFY(!s.should_stop(0));  // rank B starts step 1
    s.request();
    QVERIFY(s.requested());
    QCOMPARE(s.stop_at(), int64_t{2});
    QVERIFY(!s.should_stop(1));  // B catches up with A
    QVERIFY(s.should_stop(2));
    QVERIFY(s.should_stop(2));
    s.request();  // idempotent
    QCOMPARE(s.stop_at(), int64_t{2});
  }

  void request_before_any_step_stops_at_zero() {
    StopRequest s;
    s.request();
    QVERIFY(s.requested());
    QCOMPARE(s.stop_at(), int64_t{0});
    for (int r = 0; r < 4; ++r) QVERIFY(s.should_stop(0));
  }

  void skewed_ranks_stop_together_data() {
    QTest::addColumn<int>("threads");
    QTest::addColumn<int>("pause_us");
    QTest::newRow("2 ranks") << 2 << 50;
    QTest::newRow("4 ranks") << 4 << 100;
    QTest::newRow("8 ranks") << 8 << 20;
  }

  void skewed_ranks_stop_together() {
    QFETCH(int, threads);
    QFETCH(int, pause_us);
    StopRequest stop;
    std::atomic<int64_t> most_done{0};
    std::vector<Progress> out(static_cast<size_t>(threads));
    std::vector<std::thread> ts;
    for (int r = 0; r < threads; ++r)
      ts.emplace_back([&, r] {
        Progress& p = out[static_cast<size_t>(r)];
        for (int64_t done = 0; done < kRunaway; ++done) {
          if (stop.should_stop(done)) {
            p.stopped_at = done;
            return;
          }
          p.started = done + 1;
          // Rank r takes r + 1 pauses a step: their progress is skewed when the request comes.
          std::this_thread::sleep_for(std::chrono::microseconds((r + 1) * pause_us));
          int64_t seen = most_done.load();
          while (done + 1 > seen && !most_done.compare_exchange_weak(seen, done + 1)) {
          }
        }
      });
    while (most_done.load() < 20) std::this_thread::yield();
    stop.request();
    for (auto& t : ts) t.join();
    const int64_t at = stop.stop_at();
    QVERIFY2(at >= 20 && at < kRunaway, qPrintable(QString("stop_at %1").arg(at)));
    for (int r = 0; r < threads; ++r) {
      const Progress& p = out[static_cast<size_t>(r)];
      QVERIFY2(
          p.stopped_at == at,
          qPrintable(QString("rank %1 stopped at %2, agreed %3").arg(r).arg(p.stopped_at).arg(at)));
      QVERIFY2(
          p.started <= at,
          qPrintable(QString("rank %1 started step %2 past %3").arg(r).arg(p.started).arg(at)));
    }
  }

  void trainer_stops_between_steps() {
    if (!have_fashion_mnist()) QSKIP(kNoFashionMnist);
    TrainingSetup setup = build_training(small_job(2, 2));
    Trainer trainer(*setup.model, *setup.optimizer, *setup.data.train, setup.data.eval.get(),
                    setup.job.train, setup.job.optimizer.lr);
    std::vector<int64_t> logged, stepped, asked;
    TrainerCallbacks cb;
    cb.on_log = [&](const StepInfo& i) { logged.push_back(i.step); };
    cb.on_step = [&](const StepInfo& i) { stepped.push_back(i.step); };
    cb.should_stop = [&](int64_t done) {
      asked.push_back(done);
      return done >= 3;
    };
    const TrainResult r = trainer.run(cb);
    QCOMPARE(r.steps, int64_t{3});
    QCOMPARE(r.losses.size(), size_t{3});
    QVERIFY(r.stopped_early);
    QCOMPARE(QString::fromStdString(r.stop_reason),
             QString("stopped at the user's request after 3 steps"));
    QCOMPARE(asked, (std::vector<int64_t>{0, 1, 2, 3}));
    QCOMPARE(stepped, (std::vector<int64_t>{1, 2, 3}));
    // The regular line at step 2 and the end-of-run line for step 3.
    QCOMPARE(logged, (std::vector<int64_t>{2, 3}));
    // The evaluation at step 2 only: no final evaluation of an incomplete run.
    QCOMPARE(r.evals.size(), size_t{1});
    QCOMPARE(r.evals[0].step, int64_t{2});
    std::vector<float> now(setup.model->params().begin(), setup.model->params().end());
    QCOMPARE(r.params, now);
  }

  void trainer_stop_after_logged_step_logs_once() {
    if (!have_fashion_mnist()) QSKIP(kNoFashionMnist);
    TrainingSetup setup = build_training(small_job(2, 0));
    std::vector<int64_t> logged;
    TrainerCallbacks cb;
    cb.on_log = [&](const StepInfo& i) { logged.push_back(i.step); };
    cb.should_stop = [](int64_t done) { return done >= 4; };
    const TrainResult r = run_training(setup, cb);
    QCOMPARE(r.steps, int64_t{4});
    QCOMPARE(logged, (std::vector<int64_t>{2, 4}));
    QVERIFY(r.evals.empty());
    // Before the first step: nothing trained, nothing logged.
    TrainingSetup fresh = build_training(small_job(2, 0));
    logged.clear();
    cb.should_stop = [](int64_t) { return true; };
    const TrainResult none = run_training(fresh, cb);
    QCOMPARE(none.steps, int64_t{0});
    QVERIFY(none.stopped_early);
    QCOMPARE(QString::fromStdString(none.stop_reason),
             QString("stopped at the user's request after 0 steps"));
    QVERIFY(logged.empty());
    QVERIFY(none.evals.empty());
  }
};

QTEST_GUILESS_MAIN(TestStopRequest)
#include "tst_stop_request.moc"
