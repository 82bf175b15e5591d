// Replaying a run: a real 4-rank threads job (fashion_mlp.json, ZeRO-2, with evaluations) runs
// through RunController and records itself; ReplayController plays the recording back and, at
// its end, holds the same model as the live run, field by field. Seeking back rebuilds the model;
// play() reaches the end; a corrupted copy is read up to the bad block and says where; a file that
// is not a recording, or none at all, is refused naming the file.
#include <QtTest>

#include <QSignalSpy>
#include <QTemporaryDir>

#include <cmath>

#include "engine/job/job_spec.h"
#include "gui/replay_controller.h"
#include "gui/run_controller.h"
#include "net/run_model.h"

using namespace shardlab;
using namespace shardlab::gui;

namespace {

bool close_to(double a, double b) {
  return std::abs(a - b) <= 1e-9 * std::max({1.0, std::abs(a), std::abs(b)});
}

}  // namespace

class TestReplay : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir tmp_;
  QString recording_;
  net::RunModel live_;

  // Every field the views draw, compared rank by rank.
  static void compare_models(const net::RunModel& a, const net::RunModel& b) {
    QCOMPARE(a.events(), b.events());
    QCOMPARE(a.ranks().size(), b.ranks().size());
    for (const auto& [rank, x] : a.ranks()) {
      QVERIFY(b.ranks().count(rank));
      const net::RankState& y = b.ranks().at(rank);
      QVERIFY(x.hello.has_value() && y.hello.has_value());
      QCOMPARE(x.hello->rank, y.hello->rank);
      QCOMPARE(x.hello->world, y.hello->world);
      QCOMPARE(x.hello->dp_i, y.hello->dp_i);
      QCOMPARE(x.hello->job_id, y.hello->job_id);
      QCOMPARE(x.step, y.step);
      QCOMPARE(x.loss, y.loss);
      QCOMPARE(x.loss_series, y.loss_series);
      QCOMPARE(x.step_times, y.step_times);
      QCOMPARE(x.evals.size(), y.evals.size());
      for (size_t i = 0; i < x.evals.size(); ++i) {
        QCOMPARE(x.evals[i].step, y.evals[i].step);
        QCOMPARE(x.evals[i].loss, y.evals[i].loss);
        QCOMPARE(x.evals[i].accuracy, y.evals[i].accuracy);
        QCOMPARE(x.evals[i].samples, y.evals[i].samples);
      }
      QVERIFY(x.memory == y.memory);
      QCOMPARE(x.memory_peak, y.memory_peak);
      QCOMPARE(x.collectives, y.collectives);
      QVERIFY2(close_to(x.comm_seconds, y.comm_seconds),
               qPrintable(QString("%1 vs %2").arg(x.comm_seconds).arg(y.comm_seconds)));
      QCOMPARE(x.state, y.state);
      QCOMPARE(x.reason, y.reason);
      QCOMPARE(a.timeline().spans(rank).size(), b.timeline().spans(rank).size());
      QCOMPARE(a.timeline().steps(rank).size(), b.timeline().steps(rank).size());
    }
    QCOMPARE(a.comm().by_key().size(), b.comm().by_key().size());
    for (const auto& [key, agg] : a.comm().by_key()) {
      QVERIFY(b.comm().by_key().count(key));
      const net::CommAggregate& other = b.comm().by_key().at(key);
      QCOMPARE(agg.count, other.count);
      QCOMPARE(agg.bytes, other.bytes);
      QCOMPARE(agg.failed, other.failed);
      QVERIFY(close_to(agg.seconds, other.seconds));
    }
    QCOMPARE(a.timeline().ranks(), b.timeline().ranks());
  }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    qputenv("SHARDLAB_RUNS_DIR", tmp_.filePath("runs").toLocal8Bit());
    const JobSpec job = load_job(
        SHARDLAB_SOURCE_DIR "/resources/jobs/fashion_mlp.json",
        {"train.steps=30", "train.log_every=10", "train.eval_every=10", "train.eval_batches=2"});
    RunController run;
    QSignalSpy finished(&run, &RunController::finished);
    QVERIFY2(run.start(job), qPrintable(run.lastError()));
    recording_ = run.recordingPath();
    QVERIFY(!recording_.isEmpty());
    QVERIFY(finished.wait(180000));
    const QList<QVariant> args = finished.takeFirst();
    QVERIFY2(args.at(0).toBool(), qPrintable(args.at(1).toString()));
    live_ = run.model();
    QCOMPARE(live_.ranks().size(), size_t{4});
    QCOMPARE(live_.ranks().at(0).step, int64_t{30});
    QVERIFY(live_.ranks().at(0).evals.size() >= 3);
    QVERIFY(!live_.comm().by_key().empty());
  }

  void replayAtTheEndEqualsTheLiveRun() {
    ReplayController replay;
    QVERIFY2(replay.open(recording_), qPrintable(replay.lastError()));
    QVERIFY2(replay.note().isEmpty(), qPrintable(replay.note()));
    QVERIFY(replay.startTime() > 0);
    QVERIFY(replay.endTime() > replay.startTime());
    QCOMPARE(replay.position(), replay.startTime());
    // Only the HELLOs (and the events at the very first instant) so far.
    for (const auto& [rank, state] : replay.model().ranks()) {
      QVERIFY(state.hello.has_value());
      QCOMPARE(state.step, int64_t{0});
    }
    QSignalSpy updated(&replay, &ReplayController::updated);
    replay.seek(replay.endTime());
    QCOMPARE(updated.count(), 1);
    QCOMPARE(replay.position(), replay.endTime());
    compare_models(live_, replay.model());
  }

  void seekingBackRebuilds() {
    ReplayController replay;
    QVERIFY2(replay.open(recording_), qPrintable(replay.lastError()));
    const double mid = (replay.startTime() + replay.endTime()) / 2;
    replay.seek(mid);
    int64_t mid_steps = 0;
    for (const auto& [rank, state] : replay.model().ranks()) {
      mid_steps += state.step;
      QVERIFY(state.step <= 30);
      QCOMPARE(state.loss_series.size(), static_cast<size_t>(state.step));
    }
    QVERIFY(mid_steps > 0);
    QVERIFY(mid_steps < 4 * 30);
    replay.seek(replay.startTime());
    QCOMPARE(replay.model().ranks().size(), size_t{4});  // the HELLOs stay
    for (const auto& [rank, state] : replay.model().ranks()) {
      QCOMPARE(state.step, int64_t{0});
      QVERIFY(state.loss_series.empty());
      QVERIFY(state.hello.has_value());
    }
    QVERIFY(replay.model().events() < live_.events() / 10);
    // Forward again, in two hops: the same as one jump to the end.
    replay.seek(mid);
    replay.seek(replay.endTime());
    compare_models(live_, replay.model());
  }

  void playReachesTheEnd() {
    ReplayController replay;
    QVERIFY2(replay.open(recording_), qPrintable(replay.lastError()));
    QSignalSpy finished(&replay, &ReplayController::finished);
    QSignalSpy updated(&replay, &ReplayController::updated);
    // Fast enough to end within a few ticks whatever the run took.
    const double speed = std::max(1.0, (replay.endTime() - replay.startTime()) / 0.5);
    replay.play(speed);
    QVERIFY(replay.playing());
    QVERIFY(finished.wait(30000));
    QVERIFY(!replay.playing());
    QVERIFY(updated.count() >= 1);
    QCOMPARE(replay.position(), replay.endTime());
    compare_models(live_, replay.model());
    // Pausing at once stops it where it is.
    replay.play(1.0);
    replay.pause();
    QVERIFY(!replay.playing());
  }

  void corruptCopyStopsAtTheBadBlock() {
    const QString copy = tmp_.filePath("corrupt.slrec");
    QFile::remove(copy);
    QVERIFY(QFile::copy(recording_, copy));
    QFile f(copy);
    QVERIFY(f.open(QIODevice::ReadWrite));
    QByteArray bytes = f.readAll();
    QVERIFY(bytes.size() > 4096);
    const qsizetype middle = bytes.size() / 2;
    bytes[middle] = static_cast<char>(bytes[middle] ^ 0x5a);
    QVERIFY(f.seek(0));
    QCOMPARE(f.write(bytes), bytes.size());
    f.close();
    ReplayController replay;
    QVERIFY2(replay.open(copy), qPrintable(replay.lastError()));
    QVERIFY2(replay.note().contains(QRegularExpression("at byte \\d+")), qPrintable(replay.note()));
    const qsizetype at =
        QRegularExpression("at byte (\\d+)").match(replay.note()).captured(1).toLongLong();
    QVERIFY2(at <= middle && at >= 8, qPrintable(replay.note()));
    replay.seek(replay.endTime());
    QVERIFY(replay.model().events() < live_.events());
  }

  void nonRecordingsAreRefusedNamingTheFile() {
    ReplayController replay;
    const QString text = tmp_.filePath("notes.txt");
    {
      QFile f(text);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write("this is not a recording\n");
    }
    QVERIFY(!replay.open(text));
    QVERIFY2(replay.lastError().contains(text), qPrintable(replay.lastError()));
    QVERIFY2(replay.lastError().contains("not a ShardLab recording"),
             qPrintable(replay.lastError()));
    const QString missing = tmp_.filePath("missing.slrec");
    QVERIFY(!replay.open(missing));
    QVERIFY2(replay.lastError().contains(missing), qPrintable(replay.lastError()));
    QCOMPARE(replay.messageCount(), size_t{0});
  }
};

QTEST_MAIN(TestReplay)
#include "tst_replay.moc"
