// The web server (net/web/web_server.h) on loopback, through Beast clients written here: the
// routes and their status codes and content types, malformed, oversized and silent requests,
// the token (bearer, the login form and its cookie, the WebSocket's handshake and Origin), the
// connection cap, live frames (a full frame, then consecutive deltas at most 10 a second that
// merge into /api/run's document), 100 viewers while 256 real publishers stream into a real
// collector (every event exactly once), a viewer that stops reading (dropped, the others carry
// on), and replay viewers (pause, seek, garbage messages).
//
// Every wait has a deadline: the clients run their own io_context with run_one_for / run_for
// and Beast's stream timeouts, and a server's thread is stopped outright when it does not end.
#include <QtTest>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility> (GCC 12, C++20).
#include <utility>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include "net/collector.h"
#include "net/consumers.h"
#include "net/protocol.h"
#include "net/publisher.h"
#include "net/run_model.h"
#include "net/web/web_routes.h"
#include "net/web/web_server.h"
#include "tests/common/log_lines.h"
#include "tests/common/telemetry_events.h"
#include "tests/common/wait.h"

using namespace shardlab;
using namespace shardlab::net;
namespace tl = shardlab::telemetry;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using nlohmann::json;
using shardlab::test::LogLines;
using shardlab::test::make_event;
using shardlab::test::wait_for;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

namespace {

constexpr auto kOpTimeout = 5s;  // any one client operation

// QVERIFY that a reply's Content-Type starts with `prefix`.
#define VERIFY_TYPE(reply, prefix)                                            \
  QVERIFY2((reply).header(http::field::content_type).rfind((prefix), 0) == 0, \
           (reply).header(http::field::content_type).c_str())

tcp::endpoint loopback(uint16_t port) {
  return {asio::ip::make_address("127.0.0.1"), port};
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// ---- The server on its own io_context and thread ----

class Host {
 public:
  Host(WebOptions options, WebContent content)
      : web_(std::make_unique<WebServer>(io_, std::move(options), std::move(content))) {
    web_->start();
    thread_ = std::thread([this] {
      io_.run();
      done_.set_value();
    });
  }
  ~Host() { stop(); }
  WebServer& web() { return *web_; }
  uint16_t port() const { return web_->port(); }
  asio::io_context& io() { return io_; }
  // Runs f on the server's thread and waits for it (false when it did not run within 10 s).
  bool call(const std::function<void()>& f) {
    auto p = std::make_shared<std::promise<void>>();
    auto fut = p->get_future();
    asio::post(io_, [f, p] {
      f();
      p->set_value();
    });
    return fut.wait_for(10s) == std::future_status::ready;
  }
  void post(std::function<void()> f) { asio::post(io_, std::move(f)); }
  // Closes the server on its thread, lets the thread end (stopping it after 3 s), joins.
  void stop() {
    if (!thread_.joinable()) return;
    call([this] { web_->close(); });
    work_.reset();
    auto fut = done_.get_future();
    if (fut.wait_for(3s) != std::future_status::ready) {
      qWarning("web server thread still busy 3 s after close(): stopping its io_context");
      io_.stop();
    }
    thread_.join();
  }

 private:
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_{
      asio::make_work_guard(io_)};
  std::unique_ptr<WebServer> web_;
  std::promise<void> done_;
  std::thread thread_;
};

// A RunModel with a few ranks, for the routes' tests.
void feed_small_run(RunModel& m) {
  const double t = tl::now_seconds();
  for (int r = 0; r < 4; ++r) {
    Hello h;
    h.job_id = "web-test";
    h.rank = r;
    h.world = 4;
    h.dp = 4;
    h.dp_i = r;
    h.host = "node";
    m.add(Message(h));
    tl::StepEvent s;
    s.step = 1;
    s.loss = 2.5;
    s.step_seconds = 0.5;
    m.add(Message(make_event(r, t, s)));
  }
}

// ---- An HTTP client: one connection, every operation bounded ----

class HttpConn {
 public:
  explicit HttpConn(uint16_t port) : port_(port) {}

  error_code connect() {
    return run(
        [&](auto h) { stream_.async_connect(loopback(port_), [h](error_code ec) { h(ec, 0); }); });
  }
  error_code write(WebRequest req) {
    req.prepare_payload();
    req_ = std::move(req);
    return run([&](auto h) { http::async_write(stream_, req_, h); });
  }
  error_code write_raw(const std::string& bytes) {
    raw_ = bytes;
    return run([&](auto h) { asio::async_write(stream_, asio::buffer(raw_), h); });
  }
  error_code read(WebResponse& res, bool head = false) {
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    parser.skip(head);  // a response to HEAD has no body whatever its Content-Length says
    const error_code ec = run([&](auto h) { http::async_read(stream_, buffer_, parser, h); });
    if (!ec) res = parser.release();
    return ec;
  }
  // Reads until the server closes the connection: true on EOF or reset, false when it is still
  // open after `timeout`. `bytes`: what came before.
  bool closed_within(ms timeout, size_t* bytes = nullptr) {
    size_t total = buffer_.size();
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<ms>(deadline - Clock::now());
      if (left <= 0ms) return false;
      std::array<char, 4096> chunk{};
      size_t n = 0;
      const error_code ec = run(
          [&](auto h) {
            stream_.async_read_some(asio::buffer(chunk), [h, &n](error_code e, size_t k) {
              n = k;
              h(e, k);
            });
          },
          left);
      total += n;
      if (bytes) *bytes = total;
      if (ec == beast::error::timeout) return false;
      if (ec) return true;  // eof, connection_reset, ...
    }
  }
  tcp::socket& socket() { return stream_.socket(); }

 private:
  // Starts an operation with handler h(ec, n) and runs until it completes; the stream's own
  // timer closes the socket at the deadline (beast::error::timeout).
  template <class Start>
  error_code run(Start&& start, ms timeout = std::chrono::duration_cast<ms>(kOpTimeout)) {
    error_code result = beast::error::timeout;
    bool done = false;
    stream_.expires_after(timeout);
    start([&](error_code ec, size_t) {
      result = ec;
      done = true;
    });
    io_.restart();
    io_.run_for(timeout + 2s);
    if (!done) {
      error_code ignored;
      stream_.socket().close(ignored);
      io_.restart();
      io_.run_for(2s);
    }
    stream_.expires_never();
    return result;
  }

  uint16_t port_;
  asio::io_context io_;
  beast::tcp_stream stream_{io_};
  beast::flat_buffer buffer_;
  WebRequest req_;
  std::string raw_;
};

struct Reply {
  error_code ec;
  WebResponse res;
  unsigned status() const { return ec ? 0 : res.result_int(); }
  std::string header(http::field f) const {
    const auto it = res.find(f);
    return it == res.end() ? std::string() : std::string(to_std(it->value()));
  }
  std::string header(const char* name) const {
    const auto it = res.find(name);
    return it == res.end() ? std::string() : std::string(to_std(it->value()));
  }
  const std::string& body() const { return res.body(); }
};

// One request on a fresh connection.
Reply request(uint16_t port, http::verb method, const std::string& target,
              const std::vector<std::pair<http::field, std::string>>& headers = {},
              const std::string& body = "") {
  HttpConn c(port);
  Reply r;
  if ((r.ec = c.connect())) return r;
  WebRequest req{method, target, 11};
  req.set(http::field::host, "127.0.0.1:" + std::to_string(port));
  req.set(http::field::user_agent, "tst_web_server");
  for (const auto& [f, v] : headers) req.set(f, v);
  req.keep_alive(false);
  req.body() = body;
  if ((r.ec = c.write(std::move(req)))) return r;
  r.ec = c.read(r.res, method == http::verb::head);
  return r;
}

Reply get(uint16_t port, const std::string& target,
          const std::vector<std::pair<http::field, std::string>>& headers = {}) {
  return request(port, http::verb::get, target, headers);
}

QString describe(const Reply& r) {
  if (r.ec) return QString("no reply: %1").arg(QString::fromStdString(r.ec.message()));
  return QString("%1 %2").arg(r.status()).arg(QString::fromStdString(r.body().substr(0, 300)));
}

// application/x-www-form-urlencoded: unreserved characters as they are, space as '+', the rest
// %XX.
std::string form_encode(const std::string& s) {
  std::string o;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~') {
      o += c;
    } else if (c == ' ') {
      o += '+';
    } else {
      static const char* hex = "0123456789ABCDEF";
      o += '%';
      o += hex[u >> 4];
      o += hex[u & 15];
    }
  }
  return o;
}

// ---- A WebSocket viewer, run on the test's thread ----

class WsClient {
 public:
  explicit WsClient(uint16_t port) : port_(port) {}
  ~WsClient() {
    error_code ignored;
    beast::get_lowest_layer(ws_).socket().close(ignored);
    io_.restart();
    io_.run_for(2s);
  }
  // Before connect(): headers for the handshake request, and a small receive buffer.
  std::vector<std::pair<http::field, std::string>> headers;
  int receive_buffer = 0;

  // Connects and upgrades; `status`: the server's answer (101 when upgraded).
  error_code connect(unsigned* status = nullptr) {
    auto& s = beast::get_lowest_layer(ws_);
    if (receive_buffer > 0) {
      error_code ec;
      s.socket().open(tcp::v4(), ec);
      if (ec) return ec;
      s.socket().set_option(asio::socket_base::receive_buffer_size(receive_buffer), ec);
      if (ec) return ec;
    }
    error_code ec = run([&](auto h) {
      s.expires_after(kOpTimeout);
      s.async_connect(loopback(port_), [h](error_code e) { h(e); });
    });
    if (ec) return ec;
    ws_.set_option(websocket::stream_base::decorator([h = headers](websocket::request_type& req) {
      for (const auto& [f, v] : h) req.set(f, v);
    }));
    websocket::response_type res;
    ec = run([&](auto h) {
      s.expires_after(kOpTimeout);
      ws_.async_handshake(res, "127.0.0.1:" + std::to_string(port_), "/ws", h);
    });
    s.expires_never();
    if (status) *status = res.result_int();
    return ec;
  }
  // From now on every message is queued as it comes (and pings are answered).
  void start_reading() {
    reading_ = true;
    ws_.async_read(in_, [this](error_code ec, size_t) {
      if (ec) {
        closed_ = true;
        close_reason_ = ec;
        return;
      }
      messages_.push_back(beast::buffers_to_string(in_.data()));
      in_.consume(in_.size());
      start_reading();
    });
  }
  // The next message within `timeout`; nullopt when none came or the socket closed.
  std::optional<std::string> next(ms timeout) {
    const auto deadline = Clock::now() + timeout;
    while (messages_.empty() && reading_ && !closed_) {
      const auto left = deadline - Clock::now();
      if (left <= 0s) break;
      if (io_.stopped()) io_.restart();
      io_.run_one_for(left);
    }
    if (messages_.empty()) return std::nullopt;
    std::string m = std::move(messages_.front());
    messages_.pop_front();
    return m;
  }
  error_code send(const std::string& text) {
    out_ = std::make_shared<std::string>(text);
    return run(
        [&](auto h) { ws_.async_write(asio::buffer(*out_), [h](error_code e, size_t) { h(e); }); });
  }
  bool closed() const { return closed_; }
  error_code close_reason() const { return close_reason_; }
  size_t queued() const { return messages_.size(); }

 private:
  template <class Start>
  error_code run(Start&& start) {
    error_code result = beast::error::timeout;
    bool done = false;
    start([&](error_code ec) {
      result = ec;
      done = true;
    });
    const auto deadline = Clock::now() + kOpTimeout + 2s;
    while (!done && Clock::now() < deadline) {
      if (io_.stopped()) io_.restart();
      io_.run_one_for(deadline - Clock::now());
    }
    if (!done) {
      error_code ignored;
      beast::get_lowest_layer(ws_).socket().close(ignored);
      while (!done) {
        if (io_.stopped()) io_.restart();
        if (io_.run_one_for(2s) == 0) break;
      }
    }
    return result;
  }

  uint16_t port_;
  asio::io_context io_;
  websocket::stream<beast::tcp_stream> ws_{io_};
  beast::flat_buffer in_;
  std::deque<std::string> messages_;
  std::shared_ptr<std::string> out_;
  bool reading_ = false, closed_ = false;
  error_code close_reason_;
};

// ---- The page's merge of frames (the wire format, implemented here) ----

std::string apply_frame(json& state, const json& frame) {
  if (!frame.is_object() || !frame.contains("type") || !frame["type"].is_string())
    return "not a frame";
  const std::string type = frame["type"];
  if (type == "full") {
    state = frame;
    return "";
  }
  if (type != "delta") return "unknown type " + type;
  if (!state.is_object()) return "a delta before any full frame";
  for (const auto& [key, value] : frame.items()) {
    if (key == "ranks") {
      if (!value.is_object()) return "delta ranks is not an object";
      json& ranks = state["ranks"];
      for (const auto& [index, row] : value.items()) {
        if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos)
          return "bad rank index " + index;
        const size_t i = std::stoul(index);
        while (ranks.size() <= i) ranks.push_back(nullptr);
        ranks[i] = row;
      }
    } else if (key == "loss" || key == "evals") {
      const size_t from = value.at("from").get<size_t>();
      const json& old = state[key]["points"];
      if (from > old.size()) return key + ": from past the points held";
      json points = json::array();
      for (size_t i = 0; i < from; ++i) points.push_back(old[i]);
      for (const json& p : value.at("points")) points.push_back(p);
      state[key] = json{{"from", 0}, {"points", points}};
    } else if (key == "heat") {
      const int64_t first = value.at("first"), last = value.at("last");
      std::map<int64_t, json> cols;
      for (const json& c : state["heat"]["cols"]) cols[c[0].get<int64_t>()] = c;
      for (const json& c : value.at("cols")) cols[c[0].get<int64_t>()] = c;
      json out = json::array();
      for (const auto& [step, c] : cols)
        if (step >= first && step <= last) out.push_back(c);
      state["heat"] = json{{"first", first}, {"last", last}, {"cols", out}};
    } else {
      state[key] = value;
    }
  }
  return "";
}

// What a delta carries that did not change (the format: only changed sections).
std::string unchanged_in_delta(const json& state, const json& delta) {
  std::string out;
  for (const auto& [key, value] : delta.items()) {
    if (key == "type" || key == "frame" || key == "now") continue;
    if (key == "ranks") {
      for (const auto& [index, row] : value.items()) {
        const size_t i = std::stoul(index);
        if (i < state["ranks"].size() && state["ranks"][i] == row) out += "rank row " + index + " ";
      }
    } else if (key == "loss" || key == "evals") {
      if (value["points"].empty()) out += key + " without points ";
      if (value["from"].get<size_t>() != state[key]["points"].size())
        out += key + " from " + value["from"].dump() + " with " +
               std::to_string(state[key]["points"].size()) + " held ";
    } else if (key != "heat" && state.contains(key) && state[key] == value) {
      out += key + " ";
    }
  }
  return out;
}

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

// Checks each rank's sequence numbers as they arrive (on the collector thread).
class SequenceChecker : public MessageConsumer {
 public:
  void on_message(const Message& message) override {
    if (const auto* e = std::get_if<tl::Event>(&message)) {
      uint64_t& next = next_[e->rank];
      if (e->seq != next) ++errors;
      next = e->seq + 1;
      ++events;
    }
  }
  uint64_t events = 0, errors = 0;

 private:
  std::map<int32_t, uint64_t> next_;
};

Hello hello_of(int rank, int world, int pp, int tp, int dp, const std::string& job = "web-job") {
  Hello h;
  h.job_id = job;
  h.rank = rank;
  h.world = world;
  h.pp = pp;
  h.tp = tp;
  h.dp = dp;
  h.dp_i = rank % dp;
  h.tp_i = (rank / dp) % tp;
  h.pp_i = rank / (dp * tp);
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

class TestWebServer : public QObject {
  Q_OBJECT

 private slots:
  // Every route's status and content type; HEAD as GET without the body.
  void routes() {
    RunModel model;
    feed_small_run(model);
    WebContent content;
    content.live = &model;
    Host host(WebOptions{}, content);
    const uint16_t port = host.port();
    QVERIFY(port != 0);
    QCOMPARE(host.web().url(), "http://127.0.0.1:" + std::to_string(port) + "/");

    Reply r = get(port, "/");
    QVERIFY2(r.status() == 200, qPrintable(describe(r)));
    VERIFY_TYPE(r, "text/html");
    QVERIFY(lower(r.body()).find("<html") != std::string::npos);
    const size_t page_size = r.body().size();
    QCOMPARE(get(port, "/index.html").body(), r.body());

    r = get(port, "/dashboard.js");
    QVERIFY2(r.status() == 200, qPrintable(describe(r)));
    VERIFY_TYPE(r, "text/javascript");
    QVERIFY(!r.body().empty());
    r = get(port, "/dashboard.css");
    QVERIFY2(r.status() == 200, qPrintable(describe(r)));
    VERIFY_TYPE(r, "text/css");
    QVERIFY(!r.body().empty());

    r = get(port, "/api/run");
    QVERIFY2(r.status() == 200, qPrintable(describe(r)));
    VERIFY_TYPE(r, "application/json");
    const json run = json::parse(r.body(), nullptr, false);
    QVERIFY2(!run.is_discarded(), r.body().substr(0, 500).c_str());
    QVERIFY(run.contains("job"));
    QVERIFY(run.contains("ranks"));
    QCOMPARE(run["job"]["id"], json("web-test"));
    QCOMPARE(run["ranks"].size(), size_t{4});

    r = get(port, "/metrics");
    QVERIFY2(r.status() == 200, qPrintable(describe(r)));
    QVERIFY2(r.header(http::field::content_type).rfind("text/plain; version=0.0.4", 0) == 0,
             r.header(http::field::content_type).c_str());
    QVERIFY(r.body().find("shardlab_step{") != std::string::npos);

    for (const char* missing : {"/nope", "/api", "/api/run/x", "/login.html", "/../etc/passwd"}) {
      r = get(port, missing);
      QVERIFY2(r.status() == 404, qPrintable(QString(missing) + ": " + describe(r)));
    }
    r = get(port, "/api/run?pretty=1");  // the query is not part of the path
    QCOMPARE(r.status(), 200u);

    r = request(port, http::verb::post, "/api/run", {}, "x");
    QVERIFY2(r.status() == 405, qPrintable(describe(r)));
    QVERIFY(!r.header(http::field::allow).empty());
    r = request(port, http::verb::delete_, "/");
    QVERIFY2(r.status() == 405, qPrintable(describe(r)));
    r = get(port, "/ws");  // not an upgrade
    QVERIFY2(r.status() == 426, qPrintable(describe(r)));

    r = request(port, http::verb::head, "/");
    QVERIFY2(r.status() == 200, qPrintable(describe(r)));
    QVERIFY(r.body().empty());
    QCOMPARE(r.header(http::field::content_length), std::to_string(page_size));

    // HEAD sends no body: a second request on the same connection reads cleanly after it.
    HttpConn c(port);
    QCOMPARE(c.connect(), error_code());
    WebRequest head{http::verb::head, "/api/run", 11};
    head.set(http::field::host, "127.0.0.1");
    QCOMPARE(c.write(head), error_code());
    WebResponse res;
    QCOMPARE(c.read(res, true), error_code());
    QCOMPARE(res.result_int(), 200u);
    const std::string declared(to_std(res[http::field::content_length]));
    WebRequest again{http::verb::get, "/dashboard.css", 11};
    again.set(http::field::host, "127.0.0.1");
    QCOMPARE(c.write(again), error_code());
    QCOMPARE(c.read(res), error_code());
    QCOMPARE(res.result_int(), 200u);
    QCOMPARE(res.body(), get(port, "/dashboard.css").body());
    QVERIFY(std::stoul(declared) > 0);
    QVERIFY(host.web().stats().requests >= 18);
  }

  // Garbage is answered 400 and the connection closed; headers over max_header_bytes 431; a
  // body over max_body_bytes 413; a client that sends nothing is closed after request_timeout.
  void badRequests() {
    RunModel model;
    feed_small_run(model);
    WebContent content;
    content.live = &model;
    WebOptions o;
    o.request_timeout = 500ms;
    LogLines log;
    o.log = log.sink();
    Host host(o, content);
    const uint16_t port = host.port();

    {
      HttpConn c(port);
      QCOMPARE(c.connect(), error_code());
      QCOMPARE(c.write_raw(std::string("\x01\x02 nonsense\r\n\r\n")), error_code());
      WebResponse res;
      QCOMPARE(c.read(res), error_code());
      QCOMPARE(res.result_int(), 400u);
      QVERIFY(!res.keep_alive());
      QVERIFY2(c.closed_within(3000ms), "the connection stayed open after a 400");
    }
    {
      HttpConn c(port);
      QCOMPARE(c.connect(), error_code());
      const std::string big =
          "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + std::string(20 * 1024, 'a') + "\r\n\r\n";
      QCOMPARE(c.write_raw(big), error_code());
      WebResponse res;
      const error_code ec = c.read(res);
      QVERIFY2(!ec, ec.message().c_str());
      QCOMPARE(res.result_int(), 431u);
      QVERIFY2(c.closed_within(3000ms), "the connection stayed open after a 431");
    }
    {
      HttpConn c(port);
      QCOMPARE(c.connect(), error_code());
      const std::string body(10 * 1024, 'x');
      const std::string post =
          "POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
          "application/x-www-form-urlencoded\r\nContent-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body;
      QCOMPARE(c.write_raw(post), error_code());
      WebResponse res;
      const error_code ec = c.read(res);
      QVERIFY2(!ec, ec.message().c_str());
      QCOMPARE(res.result_int(), 413u);
      QVERIFY2(c.closed_within(3000ms), "the connection stayed open after a 413");
    }
    {
      // Connects and says nothing: closed after about request_timeout, not at once, not never.
      HttpConn c(port);
      const auto start = Clock::now();
      QCOMPARE(c.connect(), error_code());
      size_t bytes = 0;
      QVERIFY2(c.closed_within(4000ms, &bytes), "a silent client was never closed");
      const double took = seconds_since(start);
      QVERIFY2(took >= 0.4 && took < 3.0, qPrintable(QString("closed after %1 s").arg(took)));
      QCOMPARE(bytes, size_t{0});
    }
    {
      // Half a request, then silence: closed the same way.
      HttpConn c(port);
      QCOMPARE(c.connect(), error_code());
      QCOMPARE(c.write_raw("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"), error_code());
      QVERIFY2(c.closed_within(4000ms), "a client stalled mid-request was never closed");
    }
    // The server is still fine.
    QCOMPARE(get(port, "/api/run").status(), 200u);
  }

  // With the token required: bearer, the login form and its cookie, the WebSocket's handshake
  // and Origin.
  void tokenRequired() {
    RunModel model;
    feed_small_run(model);
    WebContent content;
    content.live = &model;
    WebOptions o;
    // '+', '/', '%', '&', '=' and a space: the form must encode them all.
    const std::string token = "tok+en/with space&and=eq%2B;";
    o.token = token;
    o.require_token = true;
    Host host(o, content);
    const uint16_t port = host.port();
    const std::pair<http::field, std::string> bearer{http::field::authorization, "Bearer " + token};
    const std::pair<http::field, std::string> wrong{http::field::authorization,
                                                    "Bearer tok+en/with space&and=eq%2B"};

    for (const char* path : {"/api/run", "/metrics", "/dashboard.js"}) {
      Reply r = get(port, path);
      QVERIFY2(r.status() == 401, qPrintable(QString(path) + ": " + describe(r)));
      QVERIFY2(r.header(http::field::www_authenticate).rfind("Bearer", 0) == 0,
               r.header(http::field::www_authenticate).c_str());
      QVERIFY(r.body().find(token) == std::string::npos);
      r = get(port, path, {wrong});
      QVERIFY2(r.status() == 401, qPrintable(QString(path) + ": " + describe(r)));
      r = get(port, path, {{http::field::authorization, "Basic " + token}});
      QVERIFY2(r.status() == 401, qPrintable(QString(path) + ": " + describe(r)));
      r = get(port, path, {bearer});
      QVERIFY2(r.status() == 200, qPrintable(QString(path) + ": " + describe(r)));
    }
    QVERIFY(!json::parse(get(port, "/api/run", {bearer}).body(), nullptr, false).is_discarded());

    // A browser without the cookie is sent to the login page.
    Reply r = get(port, "/");
    QVERIFY2(r.status() == 303, qPrintable(describe(r)));
    QCOMPARE(r.header(http::field::location), std::string("/login"));
    r = get(port, "/login");
    QVERIFY2(r.status() == 200, qPrintable(describe(r)));
    QVERIFY(r.header(http::field::content_type).rfind("text/html", 0) == 0);
    QVERIFY(lower(r.body()).find("<form") != std::string::npos);

    const std::pair<http::field, std::string> form{http::field::content_type,
                                                   "application/x-www-form-urlencoded"};
    r = request(port, http::verb::post, "/login", {form}, "token=wrong");
    QVERIFY2(r.status() == 401, qPrintable(describe(r)));
    QVERIFY(r.header(http::field::set_cookie).empty());
    // The token as typed but not encoded: '+' reads as a space, "%2B" as '+': not the token.
    r = request(port, http::verb::post, "/login", {form}, "token=" + token);
    QVERIFY2(r.status() == 401, qPrintable(describe(r)));
    r = request(port, http::verb::post, "/login", {form}, "");
    QVERIFY2(r.status() == 401, qPrintable(describe(r)));

    // Encoded properly, among other fields.
    r = request(port, http::verb::post, "/login", {form},
                "user=x&token=" + form_encode(token) + "&next=%2F");
    QVERIFY2(r.status() == 303, qPrintable(describe(r)));
    QCOMPARE(r.header(http::field::location), std::string("/"));
    const std::string set_cookie = r.header(http::field::set_cookie);
    QVERIFY2(set_cookie.rfind("shardlab_session=", 0) == 0, set_cookie.c_str());
    QVERIFY2(lower(set_cookie).find("httponly") != std::string::npos, set_cookie.c_str());
    const std::string cookie = set_cookie.substr(0, set_cookie.find(';'));
    const std::string value = cookie.substr(cookie.find('=') + 1);
    QVERIFY(value.size() >= 32);
    QVERIFY2(set_cookie.find(token) == std::string::npos, set_cookie.c_str());
    QVERIFY2(set_cookie.find(form_encode(token)) == std::string::npos, set_cookie.c_str());
    QVERIFY(value.find("tok") == std::string::npos);
    // The same with %20 for the space and lower-case hex digits.
    r = request(port, http::verb::post, "/login", {form},
                "token=tok%2Ben%2Fwith%20space%26and%3deq%252B%3b");
    QVERIFY2(r.status() == 303, qPrintable(describe(r)));
    QCOMPARE(r.header(http::field::set_cookie), set_cookie);

    const std::pair<http::field, std::string> with_cookie{http::field::cookie, cookie};
    QCOMPARE(get(port, "/api/run", {with_cookie}).status(), 200u);
    QCOMPARE(get(port, "/metrics", {with_cookie}).status(), 200u);
    QCOMPARE(get(port, "/", {with_cookie}).status(), 200u);
    QCOMPARE(get(port, "/api/run", {{http::field::cookie, "a=b; " + cookie + "; c=d"}}).status(),
             200u);
    QCOMPARE(get(port, "/api/run", {{http::field::cookie, "shardlab_session=" + token}}).status(),
             401u);
    QCOMPARE(
        get(port, "/api/run", {{http::field::cookie, "shardlab_session=" + value + "0"}}).status(),
        401u);
    QCOMPARE(get(port, "/api/run", {{http::field::cookie, "other=" + value}}).status(), 401u);

    // The WebSocket: refused without credentials, upgraded with the cookie or the bearer.
    {
      WsClient ws(port);
      unsigned status = 0;
      QVERIFY(ws.connect(&status));
      QCOMPARE(status, 401u);
    }
    for (const auto& credential : {with_cookie, bearer}) {
      WsClient ws(port);
      ws.headers = {credential};
      unsigned status = 0;
      const error_code ec = ws.connect(&status);
      QVERIFY2(!ec, ec.message().c_str());
      QCOMPARE(status, 101u);
      ws.start_reading();
      const auto first = ws.next(5000ms);
      QVERIFY2(first.has_value(), "no frame within 5 s");
      const json j = json::parse(*first, nullptr, false);
      QVERIFY(j.is_object());
      QCOMPARE(j["type"], json("full"));
    }
    // Another site's page (Origin of another host) is refused even with the cookie; the page's
    // own origin is not.
    const std::string self_origin = "http://127.0.0.1:" + std::to_string(port);
    for (const std::string& origin :
         {std::string("http://evil.example"), "http://evil.example:" + std::to_string(port),
          std::string("http://127.0.0.1:1"), std::string("null")}) {
      WsClient ws(port);
      ws.headers = {with_cookie, {http::field::origin, origin}};
      unsigned status = 0;
      QVERIFY(ws.connect(&status));
      QVERIFY2(status == 403,
               qPrintable(QString::fromStdString(origin) + QString(": %1").arg(status)));
    }
    {
      WsClient ws(port);
      ws.headers = {with_cookie, {http::field::origin, self_origin}};
      unsigned status = 0;
      const error_code ec = ws.connect(&status);
      QVERIFY2(!ec, ec.message().c_str());
      QCOMPARE(status, 101u);
      ws.start_reading();
      const auto first = ws.next(5000ms);
      QVERIFY(first.has_value());
      QCOMPARE(json::parse(*first, nullptr, false).value("type", ""), std::string("full"));
    }
  }

  // Without the token, the login page has nothing to do: it sends the browser to the dashboard.
  void loginWithoutToken() {
    RunModel model;
    WebContent content;
    content.live = &model;
    Host host(WebOptions{}, content);
    for (const http::verb v : {http::verb::get, http::verb::post}) {
      const Reply r = request(host.port(), v, "/login", {}, "token=x");
      QVERIFY2(r.status() == 303, qPrintable(describe(r)));
      QCOMPARE(r.header(http::field::location), std::string("/"));
      QVERIFY(r.header(http::field::set_cookie).empty());
    }
    QCOMPARE(get(host.port(), "/api/run").status(), 200u);
  }

  // max_connections: the fifth connection is closed at once; once the four go, new ones work.
  void connectionCap() {
    RunModel model;
    feed_small_run(model);
    WebContent content;
    content.live = &model;
    WebOptions o;
    o.max_connections = 4;
    LogLines log;
    o.log = log.sink();
    Host host(o, content);
    const uint16_t port = host.port();
    std::vector<std::unique_ptr<HttpConn>> idle;
    for (int i = 0; i < 4; ++i) {
      idle.push_back(std::make_unique<HttpConn>(port));
      QCOMPARE(idle.back()->connect(), error_code());
    }
    QVERIFY(wait_for([&] { return host.web().stats().accepted == 4; }, 5000ms));
    {
      HttpConn fifth(port);
      QCOMPARE(fifth.connect(), error_code());  // the kernel accepts; the server closes
      const auto start = Clock::now();
      size_t bytes = 0;
      QVERIFY2(fifth.closed_within(3000ms, &bytes), "the fifth connection was not closed");
      QVERIFY(seconds_since(start) < 2.0);
      QVERIFY(wait_for([&] { return host.web().stats().refused == 1; }, 2000ms));
    }
    QCOMPARE(host.web().stats().accepted, uint64_t{4});
    QVERIFY2(log.contains("refused"), log.all().c_str());
    // The four are still served.
    {
      WebRequest req{http::verb::get, "/api/run", 11};
      req.set(http::field::host, "127.0.0.1");
      QCOMPARE(idle[0]->write(req), error_code());
      WebResponse res;
      QCOMPARE(idle[0]->read(res), error_code());
      QCOMPARE(res.result_int(), 200u);
    }
    idle.clear();  // closes them
    // The server notices the closes; then new connections are served.
    bool served = false;
    const auto deadline = Clock::now() + 5s;
    while (!served && Clock::now() < deadline) {
      served = get(port, "/api/run").status() == 200;
      if (!served) std::this_thread::sleep_for(50ms);
    }
    QVERIFY(served);
    std::vector<std::unique_ptr<HttpConn>> again;
    for (int i = 0; i < 4; ++i) {
      again.push_back(std::make_unique<HttpConn>(port));
      QCOMPARE(again.back()->connect(), error_code());
      WebRequest req{http::verb::get, "/metrics", 11};
      req.set(http::field::host, "127.0.0.1");
      QCOMPARE(again.back()->write(req), error_code());
      WebResponse res;
      QCOMPARE(again.back()->read(res), error_code());
      QCOMPARE(res.result_int(), 200u);
    }
  }

  // A live run of 8 ranks fed on the server's thread: a full frame, then deltas numbered one
  // after another, at most about 10 a second, carrying only what changed; merged, they are
  // /api/run's document.
  void liveFrames() {
    RunModel model;
    WebContent content;
    content.live = &model;
    content.info.job_name = "live-8";
    Host host(WebOptions{}, content);
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
    WebContent content;
    content.live = &model;
    WebOptions o;
    o.viewer_stall = 1s;
    LogLines log;
    o.log = log.sink();
    Host host(o, content);
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
    Host host(WebOptions{}, content);
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

QTEST_GUILESS_MAIN(TestWebServer)
#include "tst_web_server.moc"
