// A rank that dies without a word (killed, crashed): a real collector on loopback and workers that
// do the HELLO/AUTH handshake over a raw socket, send a few events and then vanish (a reset, as
// after SIGKILL with unread data, or a plain close), or a real Publisher that closes without a
// final state. The RunModel behind the collector marks the rank failed with the reason at once,
// and so does a replay of the recording; a rank that reported finished or failed keeps that; a
// reconnecting publisher is running again; a stale connection closing after its rank reconnected
// changes nothing; a new process for a rank that had finished starts afresh.
#include <QtTest>

#include <QTemporaryDir>

#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "net/auth.h"
#include "net/collector.h"
#include "net/consumers.h"
#include "net/handshake.h"
#include "net/protocol.h"
#include "net/publisher.h"
#include "net/recording.h"
#include "net/run_model.h"
#include "tests/common/log_lines.h"
#include "tests/common/telemetry_events.h"
#include "tests/common/wait.h"
#include "tests/net/loopback.h"

using namespace shardlab;
using namespace shardlab::net;
using namespace shardlab::test;
using namespace std::chrono_literals;

namespace {

const std::string kToken = "lost-token";

Hello hello_of(int rank, int64_t pid = 4242) {
  Hello h = grid_hello("lost-job", rank, 4, 1, 1, 4);
  h.host = "node-" + std::to_string(rank);
  h.pid = pid;
  return h;
}

tl::Event event_of(int rank, uint64_t seq, tl::Payload payload) {
  tl::Event e;
  e.rank = rank;
  e.seq = seq;
  e.time = tl::now_seconds();
  e.payload = std::move(payload);
  return e;
}

tl::StepEvent step_of(int64_t n) {
  tl::StepEvent s;
  s.step = n;
  s.loss = 1.0 / static_cast<double>(n);
  s.step_seconds = 0.01;
  return s;
}

// A worker on a raw socket: the handshake (HELLO, the CHALLENGE answered with the token's HMAC,
// AUTH_OK) in the constructor, then events; it ends with a reset (what the collector sees of a
// killed process that had unread data) or a plain close (the kernel closing a dead process's
// socket). Blocking I/O; a collector that never answers fails the test by its ctest timeout.
class RawWorker {
 public:
  RawWorker(uint16_t port, const Hello& hello) : rank_(hello.rank) {
    socket_.connect(loopback(port));
    WorkerHandshake handshake(kToken, hello);
    asio::write(socket_, asio::buffer(handshake.hello_frame()));
    const Message challenge = decoded(read_frame(socket_));
    const auto* c = std::get_if<Challenge>(&challenge);
    if (!c) throw std::runtime_error("no CHALLENGE after the HELLO");
    asio::write(socket_, asio::buffer(handshake.answer(*c)));
    if (!std::holds_alternative<AuthOk>(decoded(read_frame(socket_))))
      throw std::runtime_error("no AUTH_OK after the AUTH");
    sealer_.emplace(handshake.session_key());
  }
  void send(tl::Payload payload) { send_message(Message(event_of(rank_, seq_++, payload))); }
  void send_with_seq(uint64_t seq, tl::Payload payload) {
    send_message(Message(event_of(rank_, seq, payload)));
  }
  // RST instead of FIN: SO_LINGER with a zero timeout.
  void reset() {
    socket_.set_option(asio::socket_base::linger(true, 0));
    socket_.close();
  }
  void close() {
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

 private:
  // Each event sealed on its own, so the collector takes it at once.
  void send_message(const Message& m) {
    std::vector<uint8_t> bytes = encode(m);
    sealer_->seal(bytes, 0);
    asio::write(socket_, asio::buffer(bytes));
  }

  int rank_;
  uint64_t seq_ = 0;
  std::optional<BatchSealer> sealer_;
  asio::io_context io_;
  tcp::socket socket_{io_};
};

// A collector feeding a RunModel and a recording.
struct Rig {
  explicit Rig(const std::string& recording)
      : recorder(recording), collector(options(), {&model, &recorder}) {
    collector.start();
  }
  CollectorOptions options() {
    CollectorOptions o;
    o.token = kToken;
    o.log = log.sink();
    return o;
  }
  // A copy of rank `rank`'s state, read on the collector thread.
  RankState rank(int rank) {
    RankState s;
    collector.call([&] {
      const auto it = model.model().ranks().find(rank);
      if (it != model.model().ranks().end()) s = it->second;
    });
    return s;
  }
  // Waits until `n` connections have closed: their last messages and any lost connection have
  // reached the consumers (the collector logs a close before it tells them, on the same thread,
  // and call() runs after both).
  bool closed(size_t n) {
    const bool ok = wait_for([&] { return log.count() >= n; });
    collector.call([] {});
    return ok;
  }

  LogLines log;
  RunModelConsumer model;
  RecordingConsumer recorder;
  Collector collector;
};

}  // namespace

class TestConnectionLost : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir tmp_;

 private slots:
  void initTestCase() { QVERIFY(tmp_.isValid()); }

  // Rank 2 sends a few steps, then its connection is reset or closed without a final state: it
  // is failed with the reason (and the socket error), in the model, the table and a replay.
  void killedRankIsFailedWithTheReason_data() {
    QTest::addColumn<bool>("reset");
    QTest::newRow("reset") << true;
    QTest::newRow("close") << false;
  }
  void killedRankIsFailedWithTheReason() {
    QFETCH(bool, reset);
    const std::string path =
        tmp_.filePath(reset ? "killed-reset.slrec" : "killed-close.slrec").toStdString();
    {
      Rig rig(path);
      RawWorker survivor(rig.collector.port(), hello_of(1));
      survivor.send(tl::JobStateEvent{tl::JobState::running, ""});
      {
        RawWorker victim(rig.collector.port(), hello_of(2));
        victim.send(tl::JobStateEvent{tl::JobState::running, ""});
        for (int64_t s = 1; s <= 3; ++s) victim.send(step_of(s));
        QVERIFY(wait_for([&] { return rig.rank(2).step == 3; }));
        QCOMPARE(rig.rank(2).state, tl::JobState::running);
        if (reset)
          victim.reset();
        else
          victim.close();
      }
      QVERIFY2(rig.closed(1), rig.log.all().c_str());
      const RankState r = rig.rank(2);
      QCOMPARE(r.state, tl::JobState::failed);
      QVERIFY(r.connection_lost);
      QCOMPARE(r.step, int64_t{3});
      QVERIFY2(r.reason.find("before the rank finished") != std::string::npos, r.reason.c_str());
      QVERIFY2(r.reason.find("killed") != std::string::npos, r.reason.c_str());
      if (reset)  // the socket error is in the reason
        QVERIFY2(r.reason.find("reset") != std::string::npos, r.reason.c_str());
      QCOMPARE(rig.rank(1).state, tl::JobState::running);  // the others carry on
      QCOMPARE(rig.collector.stats().lost, uint64_t{1});
      QVERIFY2(rig.log.all().find("before rank 2 finished") != std::string::npos,
               rig.log.all().c_str());
      std::string table;
      rig.collector.call([&] { table = rig.model.model().table(tl::now_seconds()); });
      QVERIFY2(table.find("FAILED: " + r.reason) != std::string::npos, table.c_str());
      survivor.send(tl::JobStateEvent{tl::JobState::finished, ""});
      survivor.close();
      QVERIFY2(rig.closed(2), rig.log.all().c_str());
      QCOMPARE(rig.collector.stats().lost, uint64_t{1});  // rank 1 had finished
      rig.collector.stop();
      rig.recorder.writer().flush();
    }
    // The recording keeps the failure: a replay shows it.
    const RecordingContents rec = read_recording(path);
    QVERIFY2(rec.complete, rec.note.c_str());
    RunModel replay;
    for (const Message& m : rec.messages) replay.add(m);
    const RankState& r = replay.ranks().at(2);
    QCOMPARE(r.state, tl::JobState::failed);
    QVERIFY(r.connection_lost);
    QVERIFY2(r.reason.find("before the rank finished") != std::string::npos, r.reason.c_str());
    QCOMPARE(replay.ranks().at(1).state, tl::JobState::finished);
  }

  // The collector's marker sequence number is not a worker's to send: a connection that does is
  // closed (and its rank, which had not finished, is lost), so no worker can fake a lost rank.
  void theCollectorsSequenceNumberIsRefused() {
    Rig rig(tmp_.filePath("reserved.slrec").toStdString());
    RawWorker liar(rig.collector.port(), hello_of(3));
    liar.send(tl::JobStateEvent{tl::JobState::running, ""});
    liar.send_with_seq(kCollectorSeq, tl::JobStateEvent{tl::JobState::failed, "fake"});
    QVERIFY2(rig.closed(1), rig.log.all().c_str());
    QVERIFY2(rig.log.all().find("reserved sequence number") != std::string::npos,
             rig.log.all().c_str());
    const RankState r = rig.rank(3);
    QCOMPARE(r.state, tl::JobState::failed);
    QVERIFY2(r.reason.find("fake") == std::string::npos, r.reason.c_str());
    QVERIFY2(r.reason.find("reserved sequence number") != std::string::npos, r.reason.c_str());
    rig.collector.stop();
  }

  // A real Publisher closing without a final state (its process ending before the rank said it
  // finished) is a lost rank too; one that published finished, or failed, keeps that.
  void finishedOrFailedRanksKeepTheirState() {
    Rig rig(tmp_.filePath("kept.slrec").toStdString());
    auto publisher_for = [&](int rank) {
      PublisherOptions o;
      o.port = rig.collector.port();
      o.token = kToken;
      o.hello = hello_of(rank);
      o.heartbeat = 60s;
      o.close_timeout = 3000ms;
      return std::make_unique<Publisher>(o);
    };
    auto finished = publisher_for(0);
    auto silent = publisher_for(3);
    for (int64_t s = 1; s <= 3; ++s) {
      finished->publish(event_of(0, 0, step_of(s)));
      silent->publish(event_of(3, 0, step_of(s)));
    }
    finished->publish(event_of(0, 0, tl::JobStateEvent{tl::JobState::finished, ""}));
    finished->close();
    silent->close();
    {
      RawWorker failing(rig.collector.port(), hello_of(1));
      failing.send(step_of(1));
      failing.send(tl::JobStateEvent{tl::JobState::failed, "out of memory"});
      // A reset drops what the collector has not read yet: wait until it has.
      QVERIFY(wait_for([&] { return rig.rank(1).state == tl::JobState::failed; }));
      failing.reset();
    }
    QVERIFY2(rig.closed(3), rig.log.all().c_str());
    QCOMPARE(rig.rank(0).state, tl::JobState::finished);
    QVERIFY(rig.rank(0).reason.empty());
    QVERIFY(!rig.rank(0).connection_lost);
    QCOMPARE(rig.rank(1).state, tl::JobState::failed);
    QCOMPARE(rig.rank(1).reason, std::string("out of memory"));
    QVERIFY(!rig.rank(1).connection_lost);
    QCOMPARE(rig.rank(3).state, tl::JobState::failed);
    QCOMPARE(rig.rank(3).step, int64_t{3});
    QVERIFY2(
        rig.rank(3).reason == "connection closed before the rank finished (killed or crashed?)",
        rig.rank(3).reason.c_str());
    QCOMPARE(rig.collector.stats().lost, uint64_t{1});
  }

  // The publisher reconnects (same job, host and pid): running again, reason cleared; its later
  // events count. A reported failure survives a reconnect.
  void aReconnectingRankIsRunningAgain() {
    Rig rig(tmp_.filePath("reconnect.slrec").toStdString());
    {
      RawWorker first(rig.collector.port(), hello_of(2));
      first.send(tl::JobStateEvent{tl::JobState::running, ""});
      first.send(step_of(1));
      QVERIFY(wait_for([&] { return rig.rank(2).step == 1; }));
      first.reset();
    }
    QVERIFY(rig.closed(1));
    QCOMPARE(rig.rank(2).state, tl::JobState::failed);
    RawWorker again(rig.collector.port(), hello_of(2));
    QVERIFY(wait_for([&] { return rig.rank(2).state == tl::JobState::running; }));
    QVERIFY(rig.rank(2).reason.empty());
    QVERIFY(!rig.rank(2).connection_lost);
    again.send(step_of(2));
    QVERIFY(wait_for([&] { return rig.rank(2).step == 2; }));
    again.send(tl::JobStateEvent{tl::JobState::failed, "loss is NaN"});
    again.close();
    QVERIFY(rig.closed(2));
    {
      RawWorker late(rig.collector.port(), hello_of(2));  // reconnects after reporting failure
      late.reset();
    }
    QVERIFY(rig.closed(3));
    QCOMPARE(rig.rank(2).state, tl::JobState::failed);
    QCOMPARE(rig.rank(2).reason, std::string("loss is NaN"));
    QCOMPARE(rig.collector.stats().lost, uint64_t{1});
  }

  // A publisher that reconnected before its old socket was seen to close: the stale connection
  // ending changes nothing; the live one ending does.
  void aStaleConnectionClosingChangesNothing() {
    Rig rig(tmp_.filePath("stale.slrec").toStdString());
    RawWorker old(rig.collector.port(), hello_of(2));
    old.send(step_of(1));
    RawWorker fresh(rig.collector.port(), hello_of(2));
    fresh.send(step_of(2));
    QVERIFY(wait_for([&] { return rig.rank(2).step == 2; }));
    old.reset();
    QVERIFY(rig.closed(1));
    QCOMPARE(rig.rank(2).state, tl::JobState::running);
    QCOMPARE(rig.collector.stats().lost, uint64_t{0});
    fresh.reset();
    QVERIFY(rig.closed(2));
    QCOMPARE(rig.rank(2).state, tl::JobState::failed);
    QCOMPARE(rig.collector.stats().lost, uint64_t{1});
  }

  // A new process for a rank that had finished (another pid: a rerun into the same collector)
  // starts afresh: when it dies, it is failed.
  void aNewProcessForAFinishedRankStartsAfresh() {
    Rig rig(tmp_.filePath("rerun.slrec").toStdString());
    {
      RawWorker first(rig.collector.port(), hello_of(2, 100));
      first.send(tl::JobStateEvent{tl::JobState::finished, ""});
      first.close();
    }
    QVERIFY(rig.closed(1));
    QCOMPARE(rig.rank(2).state, tl::JobState::finished);
    {
      RawWorker second(rig.collector.port(), hello_of(2, 200));
      // Its HELLO alone starts the rank afresh.
      QVERIFY(wait_for([&] { return rig.rank(2).state == tl::JobState::starting; }));
      QCOMPARE(rig.rank(2).hello->pid, int64_t{200});
      second.send(step_of(1));
      QVERIFY(wait_for([&] { return rig.rank(2).state == tl::JobState::running; }));
      second.reset();
    }
    QVERIFY(rig.closed(2));
    QCOMPARE(rig.rank(2).state, tl::JobState::failed);
    QVERIFY(rig.rank(2).connection_lost);
    QCOMPARE(rig.collector.stats().lost, uint64_t{1});
  }

  // Stopping the collector closes every connection: no rank is failed for that.
  void stoppingTheCollectorFailsNoRank() {
    Rig rig(tmp_.filePath("stop.slrec").toStdString());
    RawWorker worker(rig.collector.port(), hello_of(2));
    worker.send(step_of(1));
    QVERIFY(wait_for([&] { return rig.rank(2).step == 1; }));
    rig.collector.stop();
    QCOMPARE(rig.collector.stats().lost, uint64_t{0});
    QCOMPARE(rig.model.model().ranks().at(2).state, tl::JobState::running);
  }
};

QTEST_GUILESS_MAIN(TestConnectionLost)
#include "tst_connection_lost.moc"
