// Teaching mode (engine/telemetry/teaching_gate.h) on real thread runs of the toy GPT
// (resources/jobs/toy.json) on 4 ranks: the run pauses after each phase with every rank held;
// each Next phase advances exactly one phase on every rank (counted from the PhaseEvents the ranks
// publish, not from the gate's own figures), Next step runs every rank to the end of its step's
// update, Run lets it finish; a run without teaching mode never waits; a teaching run whose
// viewer never comes goes on after the viewer timeout; stopping a held run releases it; the job
// refuses teaching mode for mpi and cuda.
#include <QtTest>

#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "engine/job/job_spec.h"
#include "engine/launch/prepared_job.h"
#include "engine/launch/threads_run.h"
#include "engine/run/rank_runner.h"
#include "engine/telemetry/teaching_gate.h"
#include "kernels/cpu/gemm.h"

using namespace shardlab;
using namespace std::chrono_literals;

namespace {

const std::string kToy = SHARDLAB_SOURCE_DIR "/resources/jobs/toy.json";

// Every rank's PhaseEvents, in order.
class Phases : public telemetry::TelemetrySink {
 public:
  void publish(telemetry::Event e) noexcept override {
    std::lock_guard lock(mu_);
    if (auto* p = std::get_if<telemetry::PhaseEvent>(&e.payload)) seen_[e.rank].push_back(p->phase);
  }
  std::map<int, std::vector<telemetry::Phase>> seen() const {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  mutable std::mutex mu_;
  std::map<int, std::vector<telemetry::Phase>> seen_;
};

// The phases every rank has published, when all have published exactly `n`; else empty.
bool all_at(const Phases& phases, int world, size_t n) {
  const auto seen = phases.seen();
  if (static_cast<int>(seen.size()) != world) return false;
  for (const auto& [rank, list] : seen)
    if (list.size() != n) return false;
  return true;
}

// Polls until `gate` is paused with every rank at `n` published phases; false after 20 s.
bool paused_at(const TeachingGate& gate, const Phases& phases, size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (gate.status().paused && all_at(phases, 4, n)) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

JobSpec toy(int steps) {
  return load_job(kToy, {"train.steps=" + std::to_string(steps), "train.log_every=100"});
}

// `job` run on threads in the background, every rank's PhaseEvents collected in `phases` and,
// given a gate, held at it. Going, it closes the gate (the run is released) and waits for the end.
struct ThreadRun {
  explicit ThreadRun(const JobSpec& job, std::shared_ptr<TeachingGate> teaching = nullptr)
      : prepared(launch::prepare_job(job)), gate(std::move(teaching)) {
    options.telemetry = [this](int) -> telemetry::TelemetrySink* { return &phases; };
    options.teaching = gate;
    done =
        std::async(std::launch::async, [this] { return launch::run_threads(prepared, options); });
  }
  ~ThreadRun() {
    if (gate) gate->close();
    if (done.valid()) done.wait();
  }
  ThreadRun(const ThreadRun&) = delete;
  ThreadRun& operator=(const ThreadRun&) = delete;

  launch::PreparedJob prepared;
  std::shared_ptr<TeachingGate> gate;
  Phases phases;
  RankRunOptions options;
  std::future<ParallelRunResult> done;
};

}  // namespace

class TestTeaching : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() { kernels::use_single_blas_thread(); }

  // One micro-batch per step: forward, backward, optimizer. After the first forward every rank
  // is held; each Next phase moves every rank exactly one phase on; Next step runs them to the
  // end of the step; Run lets the run finish.
  void eachNextAdvancesOnePhaseOnEveryRank() {
    const JobSpec job = toy(4);
    auto gate = std::make_shared<TeachingGate>(TeachingOptions{4, 60});
    ThreadRun run(job, gate);
    const Phases& phases = run.phases;
    auto& done = run.done;

    QVERIFY2(paused_at(*gate, phases, 1), "the run did not pause after its first phase");
    // Held, it stays held: nothing more is published while nobody steps on.
    std::this_thread::sleep_for(300ms);
    QVERIFY(all_at(phases, 4, 1));
    using P = telemetry::Phase;
    const std::vector<P> want = {P::forward, P::backward, P::optimizer, P::forward, P::backward};
    for (size_t n = 2; n <= want.size(); ++n) {
      gate->command(TeachingCommand::next_phase);
      QVERIFY2(paused_at(*gate, phases, n), qPrintable(QString("no pause at phase %1").arg(n)));
      for (const auto& [rank, list] : phases.seen()) QCOMPARE(list.back(), want[n - 1]);
    }
    QCOMPARE(gate->status().step, int64_t{1});
    // Next step: to the end of step 2's update (the backward of step 2 is done: one phase on).
    gate->command(TeachingCommand::next_step);
    QVERIFY(paused_at(*gate, phases, 6));
    for (const auto& [rank, list] : phases.seen()) QCOMPARE(list.back(), P::optimizer);
    QCOMPARE(gate->status().step, int64_t{2});
    // And a whole step from a step's end: forward, backward, optimizer of step 3.
    gate->command(TeachingCommand::next_step);
    QVERIFY(paused_at(*gate, phases, 9));
    QCOMPARE(gate->status().step, int64_t{3});

    gate->command(TeachingCommand::run);
    QVERIFY2(done.wait_for(60s) == std::future_status::ready, "the run did not finish after Run");
    QCOMPARE(done.get().result.steps, int64_t{4});
    QVERIFY(all_at(phases, 4, 12));
    QCOMPARE(QString::fromStdString(gate->status().why_free), QString("run chosen by the viewer"));
  }

  // With pipeline and tensor parallelism the ranks run different phases at once (a 1F1B stage 0
  // runs its second forward while stage 1 runs its first backward), but every rank has the same
  // number per step: each Next phase still moves every rank exactly one phase on, the pipeline's
  // sends and receives complete within the phases released together, and the run reaches its end
  // by Next phase alone.
  void pipelineAndTensorLayoutsStepPhaseByPhase_data() {
    QTest::addColumn<QStringList>("grid");
    QTest::addColumn<int>("per_step");  // phases per step on every rank
    QTest::newRow("pp2 x dp2, 1f1b, 2 micro-batches")
        << QStringList{"parallel.pp=2", "parallel.dp=2", "parallel.micro_batches=2",
                       "parallel.schedule=1f1b", "parallel.strategy=zero1"}
        << 5;
    QTest::newRow("pp2 x dp2, gpipe, 2 micro-batches")
        << QStringList{"parallel.pp=2", "parallel.dp=2", "parallel.micro_batches=2",
                       "parallel.schedule=gpipe"}
        << 5;
    QTest::newRow("pp2 x dp2, interleaved x 2, 2 micro-batches")
        << QStringList{"model.gpt.layers=2",
                       "parallel.pp=2",
                       "parallel.dp=2",
                       "parallel.micro_batches=2",
                       "parallel.schedule=interleaved",
                       "parallel.pp_chunks=2"}
        << 9;
    QTest::newRow("tp2 x dp2") << QStringList{"parallel.tp=2", "parallel.dp=2"} << 3;
  }

  void pipelineAndTensorLayoutsStepPhaseByPhase() {
    QFETCH(QStringList, grid);
    QFETCH(int, per_step);
    std::vector<std::string> overrides = {"train.steps=2", "train.log_every=100"};
    for (const QString& g : grid) overrides.push_back(g.toStdString());
    auto gate = std::make_shared<TeachingGate>(TeachingOptions{4, 60});
    ThreadRun run(load_job(kToy, overrides), gate);
    const Phases& phases = run.phases;
    auto& done = run.done;
    const size_t total = 2 * static_cast<size_t>(per_step);
    for (size_t n = 1; n < total; ++n) {
      QVERIFY2(paused_at(*gate, phases, n), qPrintable(QString("no pause at phase %1").arg(n)));
      gate->command(TeachingCommand::next_phase);
    }
    QVERIFY2(paused_at(*gate, phases, total), "no pause after the last update");
    for (const auto& [rank, list] : phases.seen()) {
      QCOMPARE(list[static_cast<size_t>(per_step) - 1], telemetry::Phase::optimizer);
      QCOMPARE(list.back(), telemetry::Phase::optimizer);
    }
    gate->command(TeachingCommand::next_phase);
    QVERIFY2(done.wait_for(60s) == std::future_status::ready, "the run did not end");
    QCOMPARE(done.get().result.steps, int64_t{2});
  }

  // Without teaching mode (no gate) nothing waits: the run finishes with nobody stepping it on.
  void withoutTeachingNothingWaits() {
    ThreadRun run(toy(4));
    const Phases& phases = run.phases;
    auto& done = run.done;
    QVERIFY2(done.wait_for(60s) == std::future_status::ready, "a run without teaching waited");
    QVERIFY(all_at(phases, 4, 12));
    // And a job without telemetry.teaching makes no gate.
    QVERIFY(launch::teaching_gate(toy(4)) == nullptr);
    QVERIFY(launch::teaching_gate(load_job(kToy, {"telemetry.teaching=true"})) != nullptr);
  }

  // A viewer that never comes (or went away): once held for the timeout with nobody calling
  // viewer_seen() or a command, the run goes on and finishes; a viewer seen keeps it held.
  void lostViewerReleasesTheRun() {
    auto gate = std::make_shared<TeachingGate>(TeachingOptions{4, 0.5});
    ThreadRun run(toy(3), gate);
    const Phases& phases = run.phases;
    auto& done = run.done;
    QVERIFY(paused_at(*gate, phases, 1));
    // A viewer watching for 1.5 s (three timeouts): still held.
    for (int i = 0; i < 15; ++i) {
      gate->viewer_seen();
      std::this_thread::sleep_for(100ms);
    }
    QVERIFY(all_at(phases, 4, 1));
    QVERIFY(!gate->status().free);
    // Then nobody: released within the timeout (plus the gate's 100 ms poll).
    QVERIFY2(done.wait_for(60s) == std::future_status::ready, "a run with no viewer stayed held");
    QVERIFY(all_at(phases, 4, 9));
    QCOMPARE(QString::fromStdString(gate->status().why_free), QString("no viewer for 0.5 s"));
  }

  // Stopping a held run (the app's Stop) releases it; it ends after the same step on every rank.
  void stopReleasesAHeldRun() {
    launch::PreparedJob prepared = launch::prepare_job(load_job(kToy, {"telemetry.teaching=true"}));
    Phases phases;
    launch::ThreadsRun run(std::move(prepared),
                           [&](int) -> telemetry::TelemetrySink* { return &phases; });
    QVERIFY(run.teaching() != nullptr);
    QVERIFY(paused_at(*run.teaching(), phases, 1));
    run.stop();
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (!run.done() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(10ms);
    QVERIFY2(run.done(), "a stopped teaching run did not end");
    QVERIFY2(run.ok(), run.message().c_str());
    QVERIFY2(QString::fromStdString(run.message()).startsWith("stopped after 1 steps"),
             run.message().c_str());
  }

  // Teaching mode holds thread ranks of one process on the CPU: the job says so for mpi, cuda and
  // strategy none, naming the field.
  void jobRefusesTeachingWhereItCannotHold_data() {
    QTest::addColumn<QString>("override");
    QTest::addColumn<QString>("words");
    QTest::newRow("mpi") << "parallel.backend=mpi"
                         << "parallel.backend is mpi";
    QTest::newRow("cuda") << "device=cuda"
                          << "device is cuda";
    QTest::newRow("none") << "parallel.strategy=none,parallel.world_size=1"
                          << "parallel.strategy is none";
  }

  void jobRefusesTeachingWhereItCannotHold() {
    QFETCH(QString, override);
    QFETCH(QString, words);
    try {
      std::vector<std::string> overrides = {"telemetry.teaching=true"};
      for (const QString& o : override.split(',')) overrides.push_back(o.toStdString());
      load_job(kToy, overrides);
      QFAIL("the job was accepted");
    } catch (const std::exception& e) {
      const QString what = QString::fromUtf8(e.what());
      QVERIFY2(what.contains("telemetry.teaching") && what.contains(words), e.what());
    }
    try {
      load_job(kToy, {"telemetry.teaching_timeout_s=0"});
      QFAIL("a timeout of 0 s was accepted");
    } catch (const std::exception& e) {
      QVERIFY2(QString::fromUtf8(e.what()).contains("telemetry.teaching_timeout_s"), e.what());
    }
  }
};

QTEST_GUILESS_MAIN(TestTeaching)
#include "tst_teaching.moc"
