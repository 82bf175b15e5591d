// Load: 256 publishers (ranks 0..255, each a real Publisher with its own connection and thread)
// stream 200 step events per second each for 10 s into one collector that records everything;
// the recording must hold every rank's HELLO and every (rank, seq) exactly once, in order. A
// second case measures how fast the collector drains a burst.
#include <QtTest>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "net/collector.h"
#include "net/protocol.h"
#include "net/publisher.h"
#include "net/recording.h"
#include "tests/net/loopback.h"

using namespace shardlab;
using namespace shardlab::net;
using shardlab::test::SequenceChecker;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kRanks = 256;
constexpr int kDrivers = 4;  // threads calling publish(), each for kRanks / kDrivers ranks
constexpr int kRate = 200;   // events per second per rank
constexpr auto kDuration = 10s;
constexpr auto kTick = 10ms;  // publish kRate * kTick events per rank every tick

// Appends every message to a recording (on the collector thread, the writer's only user).
class RecordingConsumer : public MessageConsumer {
 public:
  explicit RecordingConsumer(RecordingWriter& writer) : writer_(writer) {}
  void on_message(const Message& message) override { writer_.append(message); }

 private:
  RecordingWriter& writer_;
};

}  // namespace

class TestTelemetryLoad : public QObject {
  Q_OBJECT
 private slots:
  void manyRanksIntoOneCollector() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("load.slrec").toStdString();
    RecordingWriter writer(path);
    RecordingConsumer consumer(writer);

    std::atomic<int> log_lines{0};
    CollectorOptions copts;
    copts.token = "load-token";
    copts.log = [&](const std::string& line) {
      // Publishers closing cleanly log one line each; anything else is worth seeing.
      if (line.find("closed by the peer") == std::string::npos) qWarning("%s", line.c_str());
      ++log_lines;
    };
    Collector collector(copts, {&consumer});
    collector.start();

    std::vector<std::unique_ptr<Publisher>> pubs;
    for (int r = 0; r < kRanks; ++r) {
      PublisherOptions o;
      o.port = collector.port();
      o.token = "load-token";
      o.hello.job_id = "load";
      o.hello.rank = r;
      o.hello.world = kRanks;
      o.hello.dp = kRanks;
      o.hello.dp_i = r;
      o.close_timeout = 10s;
      pubs.push_back(std::make_unique<Publisher>(o));
    }
    QVERIFY(QTest::qWaitFor([&] { return collector.stats().authenticated == kRanks; }, 20000));

    const int per_tick = static_cast<int>(kRate * kTick / 1s);
    const int64_t ticks = kDuration / kTick;
    const auto start = Clock::now();
    std::vector<std::thread> drivers;
    for (int t = 0; t < kDrivers; ++t) {
      drivers.emplace_back([&, t] {
        int64_t step = 0;
        for (int64_t k = 0; k < ticks; ++k) {
          std::this_thread::sleep_until(start + k * kTick);
          for (int r = t; r < kRanks; r += kDrivers) {
            for (int i = 0; i < per_tick; ++i) {
              telemetry::Event e;
              e.time = telemetry::now_seconds();
              telemetry::StepEvent s;
              s.step = step + i + 1;
              s.loss = 1.0;
              e.payload = s;
              pubs[static_cast<size_t>(r)]->publish(std::move(e));
            }
          }
          step += per_tick;
        }
      });
    }
    for (auto& d : drivers) d.join();
    const double publish_seconds = std::chrono::duration<double>(Clock::now() - start).count();

    // close() returns once the collector has read a publisher's last byte (or after 10 s).
    uint64_t total_published = 0;
    for (auto& p : pubs) p->close();
    const double ingest_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    for (auto& p : pubs) total_published += p->published();
    QVERIFY(QTest::qWaitFor([&] { return collector.stats().messages == total_published + kRanks; },
                            10000));
    collector.stop();
    writer.flush();

    const auto stats = collector.stats();
    QCOMPARE(stats.rejected, uint64_t(0));
    QCOMPARE(stats.accepted, uint64_t(kRanks));
    const uint64_t steps = uint64_t(kRanks) * uint64_t(ticks) * uint64_t(per_tick);
    qInfo(
        "%llu events (%llu steps) from %d ranks: published in %.2f s, all ingested after %.2f s "
        "= %.0f events/s",
        static_cast<unsigned long long>(total_published), static_cast<unsigned long long>(steps),
        kRanks, publish_seconds, ingest_seconds,
        static_cast<double>(total_published) / ingest_seconds);

    const RecordingContents rec = read_recording(path);
    QVERIFY2(rec.complete, rec.note.c_str());
    QCOMPARE(rec.messages.size(), static_cast<size_t>(total_published + kRanks));
    std::vector<bool> hello(kRanks, false);
    std::vector<uint64_t> next_seq(kRanks, 0);
    std::vector<int64_t> step_events(kRanks, 0);
    for (const Message& m : rec.messages) {
      if (auto* h = std::get_if<Hello>(&m)) {
        QVERIFY(h->rank >= 0 && h->rank < kRanks);
        QVERIFY2(!hello[static_cast<size_t>(h->rank)], "a second HELLO");
        hello[static_cast<size_t>(h->rank)] = true;
        QCOMPARE(h->dp_i, h->rank);
        continue;
      }
      const auto* e = std::get_if<telemetry::Event>(&m);
      QVERIFY(e);
      QVERIFY(e->rank >= 0 && e->rank < kRanks);
      const auto r = static_cast<size_t>(e->rank);
      QVERIFY2(hello[r], "an event before its rank's HELLO");
      // Exactly once and in order: each rank's sequence numbers run 0, 1, 2, ... in file order.
      if (e->seq != next_seq[r])
        QFAIL(qPrintable(
            QString("rank %1: seq %2, expected %3").arg(e->rank).arg(e->seq).arg(next_seq[r])));
      ++next_seq[r];
      if (std::holds_alternative<telemetry::StepEvent>(e->payload)) ++step_events[r];
    }
    for (int r = 0; r < kRanks; ++r) {
      const auto& p = *pubs[static_cast<size_t>(r)];
      QVERIFY(hello[static_cast<size_t>(r)]);
      QCOMPARE(p.dropped(), uint64_t(0));
      QCOMPARE(p.sent(), p.published());
      QCOMPARE(next_seq[static_cast<size_t>(r)], p.published());  // heartbeats included
      QCOMPARE(step_events[static_cast<size_t>(r)], int64_t(ticks) * per_tick);
    }
  }

  // Capacity rather than pacing: every publisher queues its events at once and the collector
  // (recording them) drains as fast as it can.
  void burstIngestRate() {
    constexpr int kBurstRanks = 64;
    constexpr int kEach = 10000;
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    RecordingWriter writer(dir.filePath("burst.slrec").toStdString());
    RecordingConsumer recorder(writer);
    SequenceChecker checker;
    CollectorOptions copts;
    copts.token = "load-token";
    Collector collector(copts, {&recorder, &checker});
    collector.start();
    std::vector<std::unique_ptr<Publisher>> pubs;
    for (int r = 0; r < kBurstRanks; ++r) {
      PublisherOptions o;
      o.port = collector.port();
      o.token = "load-token";
      o.hello.rank = r;
      o.hello.world = kBurstRanks;
      o.close_timeout = 20s;
      pubs.push_back(std::make_unique<Publisher>(o));
    }
    QVERIFY(QTest::qWaitFor([&] { return collector.stats().authenticated == kBurstRanks; }, 20000));
    const auto start = Clock::now();
    for (int i = 0; i < kEach; ++i) {
      for (auto& p : pubs) {
        telemetry::Event e;
        telemetry::StepEvent s;
        s.step = i + 1;
        e.payload = s;
        p->publish(std::move(e));
      }
    }
    uint64_t total = 0;
    for (auto& p : pubs) p->close();
    for (auto& p : pubs) {
      QCOMPARE(p->dropped(), uint64_t(0));
      QCOMPARE(p->sent(), p->published());
      total += p->published();
    }
    QVERIFY(
        QTest::qWaitFor([&] { return collector.stats().messages == total + kBurstRanks; }, 20000));
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    collector.stop();
    QCOMPARE(checker.events, total);
    QCOMPARE(checker.errors, uint64_t(0));
    qInfo("burst: %llu events from %d ranks recorded in %.2f s = %.0f events/s",
          static_cast<unsigned long long>(total), kBurstRanks, seconds,
          static_cast<double>(total) / seconds);
  }
};

QTEST_GUILESS_MAIN(TestTelemetryLoad)
#include "tst_telemetry_load.moc"
