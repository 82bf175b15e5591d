// The Asio collector and publisher on loopback (ephemeral ports): every event kind arriving in
// order, refusals (wrong token, wrong version, garbage, an oversized frame, a silent client),
// heartbeats, reconnecting to a restarted collector without losing or repeating events, and the
// publisher's bounded queue.
#include <QtTest>

#include <fmt/format.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/error.h"
#include "net/collector.h"
#include "net/protocol.h"
#include "net/publisher.h"
#include "tests/common/log_lines.h"
#include "tests/common/wait.h"
#include "tests/net/loopback.h"

using namespace shardlab;
using namespace shardlab::net;
using namespace shardlab::test;
using namespace std::chrono_literals;

namespace {

size_t count_steps(const std::vector<Message>& messages) {
  size_t n = 0;
  for (const auto& e : events_of(messages))
    if (std::holds_alternative<telemetry::StepEvent>(e.payload)) ++n;
  return n;
}

telemetry::Event step_event(int64_t step) {
  telemetry::Event e;
  e.time = telemetry::now_seconds();
  telemetry::StepEvent s;
  s.step = step;
  s.loss = 1.0 / static_cast<double>(step + 1);
  e.payload = s;
  return e;
}

CollectorOptions collector_options(LogLines& log, uint16_t port = 0) {
  CollectorOptions o;
  o.port = port;
  o.token = "the-right-token";
  o.log = log.sink();
  return o;
}

PublisherOptions publisher_options(uint16_t port, int rank, std::string token = "the-right-token") {
  PublisherOptions o;
  o.port = port;
  o.token = std::move(token);
  o.hello.job_id = "job-test";
  o.hello.rank = rank;
  o.hello.world = 8;
  o.heartbeat = 60s;  // no heartbeats unless a test asks for them
  o.backoff_min = 20ms;
  o.backoff_max = 200ms;
  o.close_timeout = 3000ms;
  return o;
}

// A raw TCP client for sending hand-made bytes; every operation is bounded.
class RawClient {
 public:
  explicit RawClient(uint16_t port) { socket_.connect(loopback(port)); }
  void send(const std::vector<uint8_t>& bytes) { asio::write(socket_, asio::buffer(bytes)); }
  // Reads until the collector closes the connection (EOF or reset); false when it is still open
  // after `timeout`. `received` counts the bytes that came first.
  bool wait_closed(std::chrono::milliseconds timeout, size_t* received = nullptr) {
    bool closed = false;
    size_t total = 0;
    std::array<uint8_t, 4096> buf{};
    std::function<void()> read = [&] {
      socket_.async_read_some(asio::buffer(buf),
                              [&](const boost::system::error_code& ec, size_t n) {
                                total += n;
                                if (ec) {
                                  closed = ec != asio::error::operation_aborted;
                                  return;
                                }
                                read();
                              });
    };
    read();
    io_.restart();
    io_.run_for(timeout);
    if (!io_.stopped()) {
      boost::system::error_code ignored;
      socket_.cancel(ignored);
      io_.restart();
      io_.run();
    }
    if (received) *received = total;
    return closed;
  }

 private:
  asio::io_context io_;
  tcp::socket socket_{io_};
};

// A HELLO frame with `header_version` in its header and `payload_version` as its first field;
// a header version below 3 leaves out the fields version 3 added (the lowest version, the nonce).
std::vector<uint8_t> hello_frame(uint16_t header_version, uint16_t payload_version) {
  Hello h;
  h.job_id = "raw";
  h.host = "raw-host";
  std::vector<uint8_t> frame = encode(Message(h));
  if (header_version < 3) {
    frame.resize(frame.size() - 2 - kChallengeSize);
    const auto length = static_cast<uint32_t>(frame.size() - kHeaderSize);
    std::memcpy(frame.data() + 8, &length, 4);
  }
  std::memcpy(frame.data() + 4, &header_version, 2);  // header: magic(4) version(2) type(2) len(4)
  std::memcpy(frame.data() + kHeaderSize, &payload_version, 2);  // first field of the payload
  return frame;
}

}  // namespace

class TestCollector : public QObject {
  Q_OBJECT
 private slots:
  void parseHostPort() {
    std::string host;
    uint16_t port = 0;
    parse_host_port("127.0.0.1:5000", host, port);
    QCOMPARE(host, std::string("127.0.0.1"));
    QCOMPARE(port, uint16_t(5000));
    parse_host_port("collector.example:65535", host, port);
    QCOMPARE(host, std::string("collector.example"));
    QCOMPARE(port, uint16_t(65535));
    parse_host_port("[::1]:7000", host, port);
    QCOMPARE(host, std::string("::1"));
    QCOMPARE(port, uint16_t(7000));
    for (const char* bad : {"host", "host:", ":80", "host:0", "host:65536", "host:8x", "::1:80",
                            "[::1]80", "[::1]:", ""}) {
      try {
        parse_host_port(bad, host, port);
        QFAIL(qPrintable(QString("accepted '%1'").arg(bad)));
      } catch (const InvalidArgument& e) {
        const std::string what = e.what();
        QVERIFY2(what.find("--telemetry: expected HOST:PORT") != std::string::npos, e.what());
        QVERIFY2(what.find(std::string("'") + bad + "'") != std::string::npos, e.what());
      }
    }
  }

  void bindFailureNamesTheAddress() {
    LogLines log;
    Collector first(collector_options(log), {});
    try {
      Collector second(collector_options(log, first.port()), {});
      QFAIL("a second collector bound the same port");
    } catch (const IoError& e) {
      const std::string what = e.what();
      QVERIFY2(what.find("127.0.0.1:" + std::to_string(first.port())) != std::string::npos,
               e.what());
    }
  }

  void everyKindArrivesInOrder() {
    LogLines log;
    MessageStore store;
    Collector collector(collector_options(log), {&store});
    collector.start();
    Publisher pub(publisher_options(collector.port(), 3));

    std::vector<telemetry::Event> sent;
    auto add = [&](telemetry::Payload payload) {
      telemetry::Event e;
      e.rank = 3;
      e.time = 1700000000.5 + static_cast<double>(sent.size());
      e.payload = std::move(payload);
      sent.push_back(e);
      pub.publish(e);
    };
    telemetry::StepEvent step;
    step.step = 7;
    step.loss = 2.5;
    step.lr = 1e-3;
    step.tokens = true;
    add(step);
    telemetry::MemoryEvent mem;
    mem.current[0] = 123;
    mem.peak[0] = 456;
    add(mem);
    telemetry::CollectiveEvent coll;
    coll.op = "all_reduce";
    coll.group = "tp[1]";
    coll.bytes = 4096;
    coll.seq = 42;
    add(coll);
    telemetry::PhaseEvent phase;
    phase.stage = 1;
    phase.micro_batch = 2;
    phase.phase = telemetry::Phase::backward;
    add(phase);
    add(telemetry::HeartbeatEvent{});
    add(telemetry::LogLineEvent{"hello from rank 3"});
    add(telemetry::JobStateEvent{telemetry::JobState::failed, "out of memory"});
    for (int i = 0; i < 200; ++i) add(step_event(100 + i).payload);

    QVERIFY2(wait_for([&] { return snapshot(collector, store).size() == sent.size() + 1; }),
             log.all().c_str());
    const auto got = snapshot(collector, store);
    auto* hello = std::get_if<Hello>(&got[0]);
    QVERIFY(hello);
    QCOMPARE(hello->rank, 3);
    QCOMPARE(hello->world, 8);
    QCOMPARE(hello->job_id, std::string("job-test"));
    QVERIFY(!hello->host.empty());
    QCOMPARE(hello->pid, static_cast<int64_t>(::getpid()));
    const auto events = events_of(got);
    QCOMPARE(events.size(), sent.size());
    for (size_t i = 0; i < events.size(); ++i) {
      QCOMPARE(events[i].rank, 3);
      QCOMPARE(events[i].seq, static_cast<uint64_t>(i));
      QCOMPARE(events[i].time, sent[i].time);
      QCOMPARE(events[i].payload.index(), sent[i].payload.index());
    }
    QCOMPARE(std::get<telemetry::StepEvent>(events[0].payload).loss, 2.5);
    QVERIFY(std::get<telemetry::StepEvent>(events[0].payload).tokens);
    QCOMPARE(std::get<telemetry::MemoryEvent>(events[1].payload).peak[0], int64_t(456));
    QCOMPARE(std::get<telemetry::CollectiveEvent>(events[2].payload).group, std::string("tp[1]"));
    QCOMPARE(std::get<telemetry::PhaseEvent>(events[3].payload).micro_batch, 2);
    QCOMPARE(std::get<telemetry::LogLineEvent>(events[5].payload).text,
             std::string("hello from rank 3"));
    QCOMPARE(std::get<telemetry::JobStateEvent>(events[6].payload).reason,
             std::string("out of memory"));
    QVERIFY(pub.connected());
    pub.close();
    QCOMPARE(pub.sent(), pub.published());
    QCOMPARE(pub.dropped(), uint64_t(0));
    const auto stats = collector.stats();
    QCOMPARE(stats.accepted, uint64_t(1));
    QCOMPARE(stats.authenticated, uint64_t(1));
    QCOMPARE(stats.rejected, uint64_t(0));
    QCOMPARE(stats.messages, uint64_t(sent.size() + 1));
  }

  void heartbeatsWhenIdle() {
    LogLines log;
    MessageStore store;
    Collector collector(collector_options(log), {&store});
    collector.start();
    auto opts = publisher_options(collector.port(), 1);
    opts.heartbeat = 50ms;
    Publisher pub(opts);
    pub.publish(step_event(1));
    QVERIFY(wait_for([&] { return events_of(snapshot(collector, store)).size() >= 4; }));
    pub.publish(step_event(2));
    pub.close();
    const auto events = events_of(snapshot(collector, store));
    QCOMPARE(events.size(), static_cast<size_t>(pub.published()));
    size_t beats = 0;
    for (size_t i = 0; i < events.size(); ++i) {
      QCOMPARE(events[i].seq, static_cast<uint64_t>(i));  // heartbeats take sequence numbers too
      if (std::holds_alternative<telemetry::HeartbeatEvent>(events[i].payload)) ++beats;
    }
    QVERIFY(beats >= 3);
  }

  void wrongTokenIsRejected() {
    LogLines log;
    MessageStore store;
    Collector collector(collector_options(log), {&store});
    collector.start();
    auto bad_opts = publisher_options(collector.port(), 5, "a-wrong-token");
    bad_opts.close_timeout = 100ms;
    Publisher bad(bad_opts);
    bad.publish(step_event(1));
    // The collector proves the token first (net/handshake.h): the worker with another token
    // finds the proof wrong and leaves before answering; the collector says what that means.
    QVERIFY2(wait_for([&] {
               return bad.last_error().find("could not prove it holds the job's token") !=
                      std::string::npos;
             }),
             bad.last_error().c_str());
    QVERIFY(wait_for([&] { return collector.stats().rejected >= 1; }));
    QVERIFY2(
        wait_for([&] { return log.contains("rank 5 left instead of answering the CHALLENGE"); }),
        log.all().c_str());
    QVERIFY(!bad.connected());

    // A good publisher on the same collector works while the bad one keeps retrying.
    Publisher good(publisher_options(collector.port(), 6));
    for (int i = 0; i < 10; ++i) good.publish(step_event(i));
    QVERIFY(wait_for([&] { return count_steps(snapshot(collector, store)) == 10; }));
    good.close();
    bad.close();
    QCOMPARE(good.sent(), uint64_t(10));
    QCOMPARE(bad.sent(), uint64_t(0));
    // Only the good publisher's messages reached the consumer.
    for (const auto& m : snapshot(collector, store)) {
      if (auto* h = std::get_if<Hello>(&m)) QCOMPARE(h->rank, 6);
      if (auto* e = std::get_if<telemetry::Event>(&m)) QCOMPARE(e->rank, 6);
    }
    QVERIFY(collector.stats().rejected >= 1);
    QCOMPARE(collector.stats().authenticated, uint64_t(1));
  }

  void wrongVersionIsClosed() {
    LogLines log;
    MessageStore store;
    Collector collector(collector_options(log), {&store});
    collector.start();
    {
      // A version in the frame header past this build's: not even decoded.
      RawClient raw(collector.port());
      raw.send(hello_frame(kProtocolVersion + 1, kProtocolVersion + 1));
      QVERIFY(raw.wait_closed(3000ms));
    }
    {
      RawClient raw(collector.port());  // a valid HELLO of a version-2 worker
      raw.send(hello_frame(2, 2));
      QVERIFY(raw.wait_closed(3000ms));
    }
    QVERIFY(wait_for([&] { return collector.stats().rejected == 2; }));
    QVERIFY2(log.contains(fmt::format("unsupported protocol version {}", kProtocolVersion + 1)),
             log.all().c_str());
    QVERIFY2(
        log.contains(fmt::format("worker speaks protocol versions 2 to 2, this collector 3 to {}",
                                 kProtocolVersion)),
        log.all().c_str());
    QVERIFY(snapshot(collector, store).empty());
  }

  void garbageIsClosedAndTheCollectorCarriesOn() {
    LogLines log;
    MessageStore store;
    Collector collector(collector_options(log), {&store});
    collector.start();
    {
      RawClient raw(collector.port());
      const std::string text = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
      raw.send(std::vector<uint8_t>(text.begin(), text.end()));
      QVERIFY(raw.wait_closed(3000ms));
    }
    QVERIFY(wait_for([&] { return log.contains("bad magic"); }));
    QVERIFY2(log.contains("connection 1 from 127.0.0.1:"), log.all().c_str());
    Publisher pub(publisher_options(collector.port(), 2));
    pub.publish(step_event(1));
    QVERIFY(wait_for([&] { return count_steps(snapshot(collector, store)) == 1; }));
    QCOMPARE(collector.stats().rejected, uint64_t(1));
  }

  void oversizedFrameIsClosedEarly() {
    LogLines log;
    Collector collector(collector_options(log), {});
    collector.start();
    RawClient raw(collector.port());
    FrameHeader header;
    header.type = static_cast<uint16_t>(MessageType::hello);
    header.length = 2u << 20;  // 2 MiB, over the 1 MiB limit
    std::vector<uint8_t> bytes(sizeof header + 100, 0);
    std::memcpy(bytes.data(), &header, sizeof header);
    const auto start = std::chrono::steady_clock::now();
    raw.send(bytes);
    QVERIFY(raw.wait_closed(3000ms));  // without waiting for (or reading) 2 MiB
    QVERIFY(std::chrono::steady_clock::now() - start < 2s);
    QVERIFY(wait_for([&] { return log.contains("2097152"); }));
    QVERIFY2(log.contains("exceeds"), log.all().c_str());
  }

  void silentClientTimesOut() {
    LogLines log;
    auto opts = collector_options(log);
    opts.handshake_timeout = 200ms;
    Collector collector(opts, {});
    collector.start();
    {
      RawClient raw(collector.port());
      const auto start = std::chrono::steady_clock::now();
      QVERIFY(raw.wait_closed(3000ms));
      const auto took = std::chrono::steady_clock::now() - start;
      QVERIFY(took >= 150ms);
      QVERIFY(took < 2s);
    }
    QVERIFY(wait_for([&] { return log.contains("no HELLO within 200 ms"); }));
    {
      RawClient raw(collector.port());  // HELLO, then no AUTH
      raw.send(hello_frame(kProtocolVersion, kProtocolVersion));
      size_t received = 0;
      QVERIFY(raw.wait_closed(3000ms, &received));
      // The CHALLENGE (version, nonce, proof) came, then the close.
      QCOMPARE(received, kHeaderSize + 2 + kChallengeSize + 32);
    }
    QVERIFY(wait_for([&] { return log.contains("no AUTH within 200 ms"); }));
    QCOMPARE(collector.stats().rejected, uint64_t(2));
  }

  void reconnectLosesAndRepeatsNothing() {
    LogLines log1, log2;
    MessageStore first, second;
    auto collector =
        std::make_unique<Collector>(collector_options(log1), std::vector<MessageConsumer*>{&first});
    collector->start();
    const uint16_t port = collector->port();
    Publisher pub(publisher_options(port, 4));
    int64_t step = 0;
    for (; step < 50; ++step) pub.publish(step_event(step));
    QVERIFY(wait_for([&] { return count_steps(snapshot(*collector, first)) == 50; }));
    collector->stop();
    QVERIFY(wait_for([&] { return !pub.connected(); }));

    for (; step < 100; ++step) pub.publish(step_event(step));  // while nobody listens
    std::this_thread::sleep_for(300ms);                        // a few failed reconnects
    QVERIFY(!pub.last_error().empty());

    std::unique_ptr<Collector> restarted;
    QVERIFY(wait_for(
        [&] {
          try {
            restarted = std::make_unique<Collector>(collector_options(log2, port),
                                                    std::vector<MessageConsumer*>{&second});
            return true;
          } catch (const IoError&) {
            return false;
          }
        },
        3000ms));
    restarted->start();
    for (; step < 150; ++step) pub.publish(step_event(step));
    pub.close();
    QCOMPARE(pub.dropped(), uint64_t(0));
    QCOMPARE(pub.sent(), pub.published());

    auto all = events_of(first.messages);
    const auto later = events_of(snapshot(*restarted, second));
    all.insert(all.end(), later.begin(), later.end());
    QCOMPARE(all.size(), static_cast<size_t>(pub.published()));
    int64_t next_step = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      QCOMPARE(all[i].rank, 4);
      QCOMPARE(all[i].seq, static_cast<uint64_t>(i));  // none lost, none repeated, in order
      if (auto* s = std::get_if<telemetry::StepEvent>(&all[i].payload))
        QCOMPARE(s->step, next_step++);
    }
    QCOMPARE(next_step, int64_t(150));
    QVERIFY(std::holds_alternative<Hello>(second.messages.at(0)));
  }

  void fullQueueDropsAndNeverBlocks() {
    // A port nobody listens on: bind one, then let it go.
    uint16_t port = 0;
    {
      LogLines log;
      Collector probe(collector_options(log), {});
      port = probe.port();
    }
    auto opts = publisher_options(port, 0);
    opts.queue_capacity = 10;
    opts.close_timeout = 100ms;
    Publisher pub(opts);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 100; ++i) pub.publish(step_event(i));
    const auto took = std::chrono::steady_clock::now() - start;
    QVERIFY(took < 500ms);  // microseconds really; generous for a loaded machine
    QVERIFY(pub.dropped() >= 90);
    QCOMPARE(pub.published() + pub.dropped(), uint64_t(100));
    QVERIFY(wait_for([&] { return !pub.last_error().empty(); }));
    const auto close_start = std::chrono::steady_clock::now();
    pub.close();
    QVERIFY(std::chrono::steady_clock::now() - close_start < 1500ms);
    QCOMPARE(pub.sent(), uint64_t(0));
    QVERIFY2(pub.last_error().find("not sent") != std::string::npos, pub.last_error().c_str());
  }
};

QTEST_GUILESS_MAIN(TestCollector)
#include "tst_collector.moc"
