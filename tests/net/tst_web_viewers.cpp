// WebSocket viewers of the web server (net/web/web_server.h) on loopback, through the Beast
// clients of tests/net/web_client.h, their frames merged with tests/net/frame_merge.h as the page
// merges them: live frames (a full frame, then consecutive deltas at most 10 a second that carry
// only what changed and merge into /api/run's document), 100 viewers while 256 real publishers
// stream into a real collector (every event exactly once), a viewer that stops reading (dropped,
// the others carry on), and replay viewers (play, pause, seek, speed, garbage messages).
//
// Every wait has a deadline: the clients run their own io_context with run_one_for / run_for
// and Beast's stream timeouts, and a server's thread is stopped outright when it does not end.
#include <QtTest>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility> (GCC 12, C++20).
#include <utility>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

#include "net/collector.h"
#include "net/consumers.h"
#include "net/protocol.h"
#include "net/publisher.h"
#include "net/run_model.h"
#include "net/web/web_server.h"
#include "tests/common/log_lines.h"
#include "tests/common/telemetry_events.h"
#include "tests/common/wait.h"
#include "tests/net/frame_merge.h"
#include "tests/net/loopback.h"
#include "tests/net/web_client.h"
#include "tests/net/web_host.h"

using namespace shardlab;
using namespace shardlab::net;
namespace tl = shardlab::telemetry;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using boost::system::error_code;
using nlohmann::json;
using namespace shardlab::test;
using namespace std::chrono_literals;

namespace {

// The first-level "type" and "frame" of a frame, without parsing the rest (cheap enough for
// 100 viewers).
class FrameHead : public nlohmann::json_sax<json> {
 public:
  std::string type;
  int64_t frame = -1;

  bool null() override { return more(); }
  bool boolean(bool) override { return more(); }
  bool number_integer(number_integer_t v) override {
    if (depth_ == 1 && key_ == "frame") frame = v;
    return more();
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (depth_ == 1 && key_ == "frame") frame = static_cast<int64_t>(v);
    return more();
  }
  bool number_float(number_float_t, const string_t&) override { return more(); }
  bool string(string_t& s) override {
    if (depth_ == 1 && key_ == "type") type = s;
    return more();
  }
  bool binary(binary_t&) override { return more(); }
  bool start_object(std::size_t) override {
    ++depth_;
    return true;
  }
  bool key(string_t& k) override {
    if (depth_ == 1) key_ = k;
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  bool more() const { return type.empty() || frame < 0; }
  int depth_ = 0;
  std::string key_;
};

// ---- Viewers driven asynchronously, many on one io_context ----

struct AsyncViewer : std::enable_shared_from_this<AsyncViewer> {
  AsyncViewer(asio::io_context& io, uint16_t port) : ws(io), port(port) {}
  websocket::stream<beast::tcp_stream> ws;
  beast::flat_buffer in;
  uint16_t port;
  bool upgraded = false;
  uint64_t frames = 0, fulls = 0, order_errors = 0;
  int64_t last_frame = 0;
  std::string first_type, error;
  // One viewer also merges every frame in full (as the page would).
  bool merge = false;
  json state;
  std::string merge_error;

  void start() {
    auto self = shared_from_this();
    beast::get_lowest_layer(ws).expires_after(20s);
    beast::get_lowest_layer(ws).async_connect(loopback(port), [self](error_code ec) {
      if (ec) {
        self->error = "connect: " + ec.message();
        return;
      }
      self->ws.async_handshake("127.0.0.1:" + std::to_string(self->port), "/ws",
                               [self](error_code e) {
                                 if (e) {
                                   self->error = "handshake: " + e.message();
                                   return;
                                 }
                                 beast::get_lowest_layer(self->ws).expires_never();
                                 self->upgraded = true;
                                 self->read();
                               });
    });
  }
  void read() {
    ws.async_read(in, [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return;  // the server closed (the end of the test)
      FrameHead head;
      const char* p = static_cast<const char*>(self->in.data().data());
      json::sax_parse(p, p + self->in.size(), &head);
      if (++self->frames == 1) self->first_type = head.type;
      if (self->merge) {
        const json f = json::parse(p, p + self->in.size(), nullptr, false);
        self->merge_error += f.is_discarded() ? "not JSON\n" : apply_frame(self->state, f);
      }
      if (head.type == "full") {
        ++self->fulls;
        if (head.frame < self->last_frame) ++self->order_errors;
      } else if (head.type != "delta" || head.frame != self->last_frame + 1) {
        ++self->order_errors;
      }
      self->last_frame = head.frame;
      self->in.consume(self->in.size());
      self->read();
    });
  }
};

Hello hello_of(int rank, int world, int pp, int tp, int dp, const std::string& job = "web-job") {
  Hello h = grid_hello(job, rank, world, pp, tp, dp);
  h.host = "node" + std::to_string(rank / 8);
  h.pid = 4000 + rank;
  return h;
}

tl::StepEvent step_of(int64_t n, double loss, double seconds = 0.1) {
  tl::StepEvent s;
  s.step = n;
  s.loss = loss;
  s.step_seconds = seconds;
  return s;
}

}  // namespace

class TestWebViewers : public QObject {
  Q_OBJECT

 private slots:
  // A live run of 8 ranks fed on the server's thread: a full frame, then deltas numbered one
  // after another, at most about 10 a second, carrying only what changed; merged, they are
  // /api/run's document.
  void liveFrames() {
    RunModel model;
    WebContent content = live(model);
    content.info.job_name = "live-8";
    WebHost host(WebOptions{}, content);
    const uint16_t port = host.port();
    QVERIFY(host.call([&] {
      for (int r = 0; r < 8; ++r) model.add(Message(hello_of(r, 8, 2, 2, 2)));
    }));

    WsClient v(port);
    QCOMPARE(v.connect(), error_code());
    v.start_reading();
    const auto first = v.next(5000ms);
    QVERIFY2(first.has_value(), "no first frame");
    json state;
    QCOMPARE(apply_frame(state, json::parse(*first)), std::string());
    QCOMPARE(state["type"], json("full"));
    QCOMPARE(state["job"]["name"], json("live-8"));
    QCOMPARE(state["ranks"].size(), size_t{8});
    int64_t frame = state["frame"];

    // Events every 10 ms for 2 s (a STEP of one rank after another).
    std::map<int, int64_t> steps_sent;
    std::thread feeder([&] {
      std::map<int, int64_t> steps;
      const auto start = Clock::now();
      for (int i = 0; Clock::now() - start < 2s; ++i) {
        const int r = i % 8;
        const int64_t n = ++steps[r];
        host.post([&model, r, n] {
          model.add(Message(make_event(r, tl::now_seconds(), step_of(n, 10.0 / (n + r)))));
        });
        std::this_thread::sleep_until(start + (i + 1) * 10ms);
      }
      steps_sent = steps;
    });
    const auto start = Clock::now();
    int in_window = 0, deltas = 0;
    std::string problems;
    auto take = [&](const std::string& text) {
      const json f = json::parse(text, nullptr, false);
      if (f.is_discarded()) {
        problems += "a frame that is not JSON\n";
        return;
      }
      const int64_t n = f.value("frame", int64_t{-1});
      if (f.value("type", "") == "delta") {
        ++deltas;
        if (n != frame + 1)
          problems += "delta " + std::to_string(n) + " after " + std::to_string(frame) + "\n";
        const std::string same = unchanged_in_delta(state, f);
        if (!same.empty()) problems += "frame " + std::to_string(n) + " repeats: " + same + "\n";
      } else if (n <= frame) {
        problems += "full " + std::to_string(n) + " after " + std::to_string(frame) + "\n";
      }
      frame = n;
      problems += apply_frame(state, f);
    };
    while (Clock::now() - start < 2s) {
      const auto left = std::chrono::duration_cast<ms>(start + 2s - Clock::now());
      if (left <= 0ms) break;
      if (const auto m = v.next(left)) {
        ++in_window;
        take(*m);
      }
    }
    feeder.join();
    // The last events show within a frame or two; then the stream is quiet.
    int quiet_after = 0;
    for (int i = 0; i < 100; ++i) {
      const auto m = v.next(600ms);
      if (!m) break;
      ++quiet_after;
      take(*m);
    }
    QVERIFY2(problems.empty(), problems.c_str());
    QVERIFY2(in_window <= 25, qPrintable(QString("%1 frames in 2 s").arg(in_window)));
    QVERIFY2(in_window >= 5, qPrintable(QString("only %1 frames in 2 s").arg(in_window)));
    QVERIFY(quiet_after <= 3);
    QVERIFY(deltas >= 5);
    QVERIFY(!v.next(300ms).has_value());  // nothing changed: nothing sent

    // The merged state is the run as /api/run says.
    const Reply r = get(port, "/api/run");
    QCOMPARE(r.status(), 200u);
    const json api = json::parse(r.body());
    QCOMPARE(state["ranks"], api["ranks"]);
    QCOMPARE(state["loss"]["points"], api["loss"]["points"]);
    QCOMPARE(state["job"]["step"], api["job"]["step"]);
    QCOMPARE(state["job"], api["job"]);
    // And the run as the test fed it.
    int64_t newest = 0;
    for (const auto& [rank, n] : steps_sent) {
      newest = std::max(newest, n);
      QCOMPARE(state["ranks"][static_cast<size_t>(rank)]["step"].get<int64_t>(), n);
    }
    QCOMPARE(state["job"]["step"].get<int64_t>(), newest);
    QCOMPARE(state["loss"]["points"].size(), size_t(steps_sent[0]));
    for (size_t i = 0; i < state["loss"]["points"].size(); ++i) {
      const json& p = state["loss"]["points"][i];
      QCOMPARE(p[0].get<int64_t>(), int64_t(i + 1));
      QVERIFY(std::abs(p[1].get<double>() - 10.0 / double(i + 1)) < 1e-4);
    }
    QCOMPARE(host.web().stats().viewers_open, uint64_t{1});
    QVERIFY(host.web().stats().frames >= uint64_t(in_window));
  }

  // 256 real publishers stream into a real collector while 100 viewers watch the web server on
  // the collector's thread: every event arrives exactly once, every viewer gets a full frame and
  // then frames in order, and 100 viewers are open at once.
  void hundredViewersWhileRanksPublish() {
    constexpr int kRanks = 256, kViewers = 100, kDrivers = 4;
    constexpr auto kTick = 20ms;  // one STEP per rank per tick: 50 a second
    constexpr int kTicks = 200;   // 4 s
    const std::string token = "web-load-token";

    RunModelConsumer models;
    SequenceChecker checker;
    LogLines clog;
    CollectorOptions copts;
    copts.token = token;
    std::atomic<int> odd_lines{0};
    copts.log = [&](const std::string& line) {
      if (line.find("closed by the peer") == std::string::npos) {
        ++odd_lines;
        clog.sink()(line);
      }
    };
    Collector collector(copts, {&models, &checker});
    WebOptions wopts;
    LogLines wlog;
    wopts.log = wlog.sink();
    WebContent content;
    content.info.job_name = "load";
    content.live = &models.model();
    content.connections = [&collector] { return collector.stats().open; };
    WebServer web(collector.io_context(), wopts, content);
    collector.on_stop([&web] { web.close(); });
    web.start();
    collector.start();

    std::vector<std::unique_ptr<Publisher>> pubs;
    for (int r = 0; r < kRanks; ++r) {
      PublisherOptions o;
      o.port = collector.port();
      o.token = token;
      o.hello = hello_of(r, kRanks, 4, 4, 16, "load");
      o.heartbeat = 60s;  // no heartbeats: the events are the STEPs alone
      o.close_timeout = 10s;
      pubs.push_back(std::make_unique<Publisher>(o));
    }
    QVERIFY2(wait_for([&] { return collector.stats().authenticated == kRanks; }, 20000ms),
             clog.all().c_str());

    // The viewers, on one io_context of their own.
    asio::io_context cio;
    std::vector<std::shared_ptr<AsyncViewer>> viewers;
    for (int i = 0; i < kViewers; ++i) {
      viewers.push_back(std::make_shared<AsyncViewer>(cio, web.port()));
      viewers.back()->merge = i == 0;
      viewers.back()->start();
    }
    std::promise<void> clients_done;
    std::thread clients([&] {
      cio.run();
      clients_done.set_value();
    });
    // Runs f on the viewers' thread and waits for it.
    auto on_clients = [&](const std::function<void()>& f) {
      auto p = std::make_shared<std::promise<void>>();
      auto fut = p->get_future();
      asio::post(cio, [f, p] {
        f();
        p->set_value();
      });
      return fut.wait_for(10s) == std::future_status::ready;
    };
    auto stop_clients = [&] {
      if (!clients.joinable()) return;
      if (clients_done.get_future().wait_for(10s) != std::future_status::ready) {
        qWarning("viewers still running 10 s after the server closed: stopping them");
        cio.stop();
      }
      clients.join();
    };
    struct Cleanup {
      std::function<void()> f;
      ~Cleanup() { f(); }
    } cleanup{[&] {
      collector.stop();
      stop_clients();
    }};

    uint64_t peak = 0;
    QVERIFY2(wait_for(
                 [&] {
                   peak = std::max(peak, web.stats().viewers_open);
                   return peak == kViewers;
                 },
                 20000ms),
             qPrintable(QString("%1 viewers open").arg(peak)));

    std::atomic<int> drivers_left{kDrivers};
    const auto start = Clock::now();
    std::vector<std::thread> drivers;
    for (int t = 0; t < kDrivers; ++t)
      drivers.emplace_back([&, t] {
        for (int k = 0; k < kTicks; ++k) {
          std::this_thread::sleep_until(start + k * kTick);
          for (int r = t; r < kRanks; r += kDrivers) {
            tl::Event e;
            e.time = tl::now_seconds();
            e.payload = step_of(k + 1, 5.0 / (k + 1));
            pubs[static_cast<size_t>(r)]->publish(std::move(e));
          }
        }
        --drivers_left;
      });
    while (drivers_left > 0) {
      peak = std::max(peak, web.stats().viewers_open);
      std::this_thread::sleep_for(10ms);
    }
    for (auto& d : drivers) d.join();
    const double publish_seconds = seconds_since(start);
    uint64_t published = 0;
    for (auto& p : pubs) p->begin_close();
    for (auto& p : pubs) p->close();
    for (auto& p : pubs) {
      QCOMPARE(p->dropped(), uint64_t{0});
      QCOMPARE(p->sent(), p->published());
      published += p->published();
    }
    QCOMPARE(published, uint64_t{kRanks} * kTicks);
    QVERIFY2(
        wait_for([&] { return collector.stats().messages == published + kRanks; }, 20000ms),
        qPrintable(
            QString("%1 of %2 messages").arg(collector.stats().messages).arg(published + kRanks)));
    uint64_t events = 0, errors = 0, model_events = 0;
    int64_t newest = 0;
    collector.call([&] {
      events = checker.events;
      errors = checker.errors;
      model_events = models.model().events();
      newest = models.model().newest_step();
    });
    QCOMPARE(errors, uint64_t{0});
    QCOMPARE(events, uint64_t{kRanks} * kTicks);
    QCOMPARE(model_events, events);
    QCOMPARE(newest, int64_t{kTicks});
    // Once nothing changes any more (the publishers' connections ended: the ranks show as lost),
    // every viewer holds the same, last frame: the last delta, or a full frame of that number
    // for one that was still writing when it came.
    bool converged = false;
    std::vector<int64_t> previous;
    const auto settle = Clock::now() + 20s;
    while (!converged && Clock::now() < settle) {
      std::vector<int64_t> lasts;
      QVERIFY(on_clients([&] {
        for (const auto& v : viewers) lasts.push_back(v->last_frame);
      }));
      converged = lasts == previous &&
                  std::all_of(lasts.begin(), lasts.end(), [&](int64_t f) { return f == lasts[0]; });
      previous = lasts;
      if (!converged) std::this_thread::sleep_for(500ms);
    }
    QVERIFY2(converged, "the viewers did not settle on one frame within 20 s");
    // The merging viewer's state is the run as /api/run says, and as the publishers sent it.
    json merged;
    std::string merge_error;
    QVERIFY(on_clients([&] {
      merged = viewers[0]->state;
      merge_error = viewers[0]->merge_error;
    }));
    QVERIFY2(merge_error.empty(), merge_error.c_str());
    const Reply api_reply = get(web.port(), "/api/run");
    QCOMPARE(api_reply.status(), 200u);
    const json api = json::parse(api_reply.body());
    QCOMPARE(merged["ranks"].size(), size_t{kRanks});
    QVERIFY(merged["ranks"] == api["ranks"]);
    QVERIFY(merged["job"] == api["job"]);
    QCOMPARE(merged["job"]["step"].get<int64_t>(), int64_t{kTicks});
    QCOMPARE(merged["job"]["events"].get<uint64_t>(), events);
    for (const json& row : merged["ranks"]) QCOMPARE(row["step"].get<int64_t>(), int64_t{kTicks});
    QCOMPARE(merged["loss"]["points"].size(), size_t{kTicks});

    // Stop the collector: its hook closes the server, which ends the viewers.
    const WebStats before_stop = web.stats();
    const auto stop_start = Clock::now();
    collector.stop();
    const double stop_seconds = seconds_since(stop_start);
    stop_clients();
    QCOMPARE(peak, uint64_t{kViewers});
    QCOMPARE(before_stop.dropped, uint64_t{0});
    QCOMPARE(web.stats().viewers_open, uint64_t{0});

    uint64_t least = ~uint64_t{0}, most = 0, total = 0;
    for (const auto& v : viewers) {
      QVERIFY2(v->upgraded, v->error.c_str());
      QCOMPARE(v->first_type, std::string("full"));
      QVERIFY(v->fulls >= 1);
      QCOMPARE(v->order_errors, uint64_t{0});
      least = std::min(least, v->frames);
      most = std::max(most, v->frames);
      total += v->frames;
    }
    qInfo(
        "%d ranks x %d steps published in %.2f s; %d viewers: %llu..%llu frames each, "
        "%llu frames / %.1f MB sent; collector stop %.2f s",
        kRanks, kTicks, publish_seconds, kViewers, static_cast<unsigned long long>(least),
        static_cast<unsigned long long>(most), static_cast<unsigned long long>(before_stop.frames),
        static_cast<double>(before_stop.bytes) / 1e6, stop_seconds);
    QVERIFY2(least >= 3, qPrintable(QString("a viewer got only %1 frames").arg(least)));
    QCOMPARE(total, before_stop.frames);
    QVERIFY2(odd_lines == 0, clog.all().c_str());
  }

  // A viewer that stops reading (a small receive buffer, never read) is dropped after
  // viewer_stall while the frames are large (1,024 ranks changing every 100 ms); a healthy
  // viewer keeps receiving.
  void stalledViewerIsDropped() {
    constexpr int kWorld = 1024;
    RunModel model;
    WebOptions o;
    o.viewer_stall = 1s;
    LogLines log;
    o.log = log.sink();
    WebHost host(o, live(model));
    const uint16_t port = host.port();
    QVERIFY(host.call([&] {
      for (int r = 0; r < kWorld; ++r) model.add(Message(hello_of(r, kWorld, 4, 4, 64)));
    }));
    std::atomic<bool> feeding{true};
    std::thread feeder([&] {
      for (int64_t n = 1; feeding; ++n) {
        host.post([&model, n] {
          const double t = tl::now_seconds();
          for (int r = 0; r < kWorld; ++r)
            model.add(Message(make_event(r, t, step_of(n, 1.0 / double(n + r)))));
        });
        std::this_thread::sleep_for(100ms);
      }
    });
    struct Stop {
      std::atomic<bool>& feeding;
      std::thread& feeder;
      ~Stop() {
        feeding = false;
        if (feeder.joinable()) feeder.join();
      }
    } stop_feeder{feeding, feeder};

    WsClient stalled(port);
    stalled.receive_buffer = 4096;
    QCOMPARE(stalled.connect(), error_code());  // and never reads
    WsClient healthy(port);
    QCOMPARE(healthy.connect(), error_code());
    healthy.start_reading();
    QVERIFY(wait_for([&] { return host.web().stats().viewers_open == 2; }, 5000ms));

    const auto start = Clock::now();
    uint64_t received = 0;
    size_t largest = 0;
    while (host.web().stats().dropped == 0 && Clock::now() - start < 30s) {
      if (const auto m = healthy.next(50ms)) {
        ++received;
        largest = std::max(largest, m->size());
      }
    }
    const double took = seconds_since(start);
    const WebStats s = host.web().stats();
    QVERIFY2(s.dropped == 1,
             qPrintable(QString("no viewer dropped after %1 s (frames up to %2 bytes; kernel "
                                "buffers larger than the frames sent meanwhile?)")
                            .arg(took)
                            .arg(largest)));
    qInfo("the stalled viewer was dropped after %.1f s; frames up to %zu bytes", took, largest);
    QVERIFY2(log.contains("dropped"), log.all().c_str());
    QVERIFY(!healthy.closed());
    // The healthy viewer carries on.
    const uint64_t before = received;
    const auto after = Clock::now();
    while (Clock::now() - after < 1500ms)
      if (healthy.next(50ms)) ++received;
    QVERIFY2(received - before >= 3,
             qPrintable(QString("%1 frames after the drop").arg(received - before)));
    QCOMPARE(host.web().stats().dropped, uint64_t{1});
    QCOMPARE(host.web().stats().viewers_open, uint64_t{1});
    QVERIFY(!healthy.closed());
  }

  // Replay: every viewer has its own cursor: a full frame with the replay section, play/pause,
  // seek (the job's step as the events say at that time), garbage ignored.
  void replayViewer() {
    constexpr double kStart = 1.7e9;
    constexpr int kRanks = 4, kSteps = 30;
    auto recording = std::make_shared<std::vector<Message>>();
    for (int r = 0; r < kRanks; ++r) recording->emplace_back(hello_of(r, kRanks, 1, 1, kRanks));
    // Rank 0's heartbeat opens the recording at kStart; step k of rank r comes at
    // (k - 1) * 0.1 + 0.013 + 0.02 r seconds, in time order.
    std::vector<std::pair<double, int64_t>> step_times;  // (seconds from the start, step)
    std::vector<tl::Event> events;
    std::map<int, uint64_t> seq;
    events.push_back(make_event(0, kStart, tl::HeartbeatEvent{}, seq[0]++));
    for (int k = 1; k <= kSteps; ++k)
      for (int r = 0; r < kRanks; ++r) {
        const double at = (k - 1) * 0.1 + 0.013 + 0.02 * r;
        events.push_back(make_event(r, kStart + at, step_of(k, 4.0 / k), seq[r]++));
        step_times.emplace_back(at, k);
      }
    for (const auto& e : events) recording->emplace_back(e);
    double last = 0;
    for (const auto& e : events) last = std::max(last, e.time - kStart);
    auto step_at = [&](double t) {
      int64_t s = 0;
      for (const auto& [at, k] : step_times)
        if (at <= t) s = std::max(s, k);
      return s;
    };

    WebContent content;
    content.info.mode = "replay";
    content.info.job_name = "replayed";
    content.recording = recording;
    WebHost host(WebOptions{}, content);
    const uint16_t port = host.port();

    WsClient v(port);
    QCOMPARE(v.connect(), error_code());
    v.start_reading();
    json state;
    std::string problems;
    auto take = [&](const std::string& text) {
      const json f = json::parse(text, nullptr, false);
      if (f.is_discarded()) problems += "a frame that is not JSON\n";
      problems += apply_frame(state, f);
    };
    auto drain = [&](ms quiet) {  // takes frames until none comes for `quiet`
      int n = 0;
      while (n < 200) {
        const auto m = v.next(quiet);
        if (!m) break;
        take(*m);
        ++n;
      }
      return n;
    };
    // Takes frames until pred() holds (true) or `timeout` passes (false).
    auto read_until = [&](const std::function<bool()>& pred, ms timeout) {
      const auto deadline = Clock::now() + timeout;
      while (!pred()) {
        const auto left = std::chrono::duration_cast<ms>(deadline - Clock::now());
        if (left <= 0ms || v.closed()) return false;
        if (const auto m = v.next(left)) take(*m);
      }
      return true;
    };
    const auto first = v.next(5000ms);
    QVERIFY(first.has_value());
    take(*first);
    QCOMPARE(state["type"], json("full"));
    QCOMPARE(state["job"]["mode"], json("replay"));
    QVERIFY(state.contains("replay"));
    QVERIFY2(std::abs(state["replay"]["duration"].get<double>() - last) < 1e-3,
             state["replay"].dump().c_str());
    QVERIFY(std::abs(last - 2.973) < 1e-6);
    QCOMPARE(state["replay"]["playing"], json(true));
    QCOMPARE(state["replay"]["speed"].get<double>(), 1.0);
    const double p0 = state["replay"]["position"];

    // Playing: the position moves.
    QVERIFY2(read_until([&] { return state["replay"]["position"].get<double>() > p0; }, 5000ms),
             state["replay"].dump().c_str());
    const double p1 = state["replay"]["position"];
    QVERIFY(p1 < last);  // not at the end yet: pausing means something

    // Paused: it stays.
    QCOMPARE(v.send(R"({"cmd":"pause"})"), error_code());
    QVERIFY2(read_until([&] { return state["replay"]["playing"] == json(false); }, 5000ms),
             state["replay"].dump().c_str());
    QVERIFY(state["replay"]["position"].get<double>() < last);
    const double paused_at = state["replay"]["position"];
    QVERIFY(!v.next(600ms).has_value());  // nothing moves, nothing is sent
    QCOMPARE(state["replay"]["position"].get<double>(), paused_at);
    QCOMPARE(state["job"]["step"].get<int64_t>(), step_at(paused_at));

    // Seek: the position and the step as the events say at 1.5 s.
    QCOMPARE(v.send(R"({"cmd":"seek","t":1.5})"), error_code());
    QVERIFY(read_until([&] { return state["replay"]["position"] == json(1.5); }, 5000ms));
    drain(200ms);
    QCOMPARE(state["replay"]["position"].get<double>(), 1.5);
    QCOMPARE(step_at(1.5), int64_t{15});
    QCOMPARE(state["job"]["step"].get<int64_t>(), step_at(1.5));
    QCOMPARE(state["replay"]["step"].get<int64_t>(), step_at(1.5));
    for (int r = 0; r < kRanks; ++r)
      QCOMPARE(state["ranks"][static_cast<size_t>(r)]["step"].get<int64_t>(), int64_t{15});
    QCOMPARE(state["loss"]["points"].size(), size_t{15});

    // Garbage is ignored, and the socket stays open.
    for (const char* junk : {"this is not json", "{\"cmd\":", "[1,2,3]", "{\"cmd\":42}",
                             "{\"cmd\":\"seek\",\"t\":\"abc\"}", "{\"cmd\":\"seek\"}",
                             "{\"cmd\":\"explode\"}", "null", ""}) {
      QCOMPARE(v.send(junk), error_code());
    }
    QVERIFY(!v.next(400ms).has_value());
    QVERIFY(!v.closed());
    QCOMPARE(state["replay"]["position"].get<double>(), 1.5);

    // Back in time: the model is rebuilt to the earlier position.
    QCOMPARE(v.send(R"({"cmd":"seek","t":0.55})"), error_code());
    QVERIFY(read_until([&] { return state["replay"]["position"] == json(0.55); }, 5000ms));
    drain(200ms);
    QVERIFY(!v.closed());
    QCOMPARE(state["replay"]["position"].get<double>(), 0.55);
    QCOMPARE(state["job"]["step"].get<int64_t>(), step_at(0.55));
    QCOMPARE(state["loss"]["points"].size(), size_t(step_at(0.55)));
    QVERIFY2(problems.empty(), problems.c_str());

    // Another viewer has its own cursor: it starts at the beginning, playing.
    {
      WsClient other(port);
      QCOMPARE(other.connect(), error_code());
      other.start_reading();
      const auto f = other.next(5000ms);
      QVERIFY(f.has_value());
      const json j = json::parse(*f);
      QCOMPARE(j["replay"]["playing"], json(true));
      QVERIFY(j["replay"]["position"].get<double>() < 2.0);
    }
    // The first viewer is still paused at 0.55: all it may still get is its seek's timeline
    // (a delta carries the timeline at most once per kTimelineSeconds), nothing that moves.
    const auto quiet_until = Clock::now() + 1500ms;
    while (Clock::now() < quiet_until)
      if (const auto m = v.next(100ms)) {
        const json j = json::parse(*m);
        for (const auto& item : j.items())
          QVERIFY2(item.key() == "type" || item.key() == "frame" || item.key() == "now" ||
                       item.key() == "timeline",
                   m->c_str());
        take(*m);
      }
    QCOMPARE(state["replay"]["position"].get<double>(), 0.55);

    // Play at 4x from 0.55: the end (and the last step) is reached in well under a second.
    QCOMPARE(v.send(R"({"cmd":"speed","x":4})"), error_code());
    QCOMPARE(v.send(R"({"cmd":"play"})"), error_code());
    const auto until = Clock::now() + 10s;
    auto at_end = [&] {
      return state["replay"]["playing"] == json(false) &&
             std::abs(state["replay"]["position"].get<double>() - last) < 1e-3;
    };
    bool played = false;  // a frame saying it plays came before the end
    while (Clock::now() < until && !at_end())
      if (const auto m = v.next(100ms)) {
        take(*m);
        played |= state["replay"]["playing"] == json(true);
      }
    QVERIFY(played);
    QCOMPARE(state["replay"]["playing"], json(false));
    QVERIFY2(std::abs(state["replay"]["position"].get<double>() - last) < 1e-3,
             state["replay"].dump().c_str());
    QCOMPARE(state["replay"]["speed"].get<double>(), 4.0);
    QCOMPARE(state["job"]["step"].get<int64_t>(), int64_t{kSteps});
    QVERIFY2(problems.empty(), problems.c_str());

    // A message from the page over 4 KiB closes the socket.
    QCOMPARE(v.send("{\"cmd\":\"pause\",\"pad\":\"" + std::string(5000, 'x') + "\"}"),
             error_code());
    const auto close_deadline = Clock::now() + 3s;
    while (!v.closed() && Clock::now() < close_deadline) v.next(100ms);
    QVERIFY2(v.closed(), "a 5 KB message from the page did not close the socket");
    QVERIFY(wait_for([&] { return host.web().stats().viewers_open == 0; }, 2000ms));

    // /api/run shows the whole recording.
    const json api = json::parse(get(port, "/api/run").body());
    QCOMPARE(api["job"]["step"].get<int64_t>(), int64_t{kSteps});
    QCOMPARE(api["job"]["mode"], json("replay"));
  }
};

QTEST_GUILESS_MAIN(TestWebViewers)
#include "tst_web_viewers.moc"
