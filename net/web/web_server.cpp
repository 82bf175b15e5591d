#include "net/web/web_server.h"

#include <fmt/format.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "engine/core/error.h"
#include "engine/telemetry/events.h"
#include "net/listener.h"
#include "net/web/metrics.h"
#include "net/web/replay_cursor.h"
#include "net/web/web_routes.h"

namespace shardlab::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

bool is_loopback(const std::string& address) {
  error_code ec;
  const auto a = asio::ip::make_address(address, ec);
  if (ec) return address == "localhost";
  return a.is_loopback();
}

namespace {
class Viewer;
}

struct WebServer::Impl : std::enable_shared_from_this<WebServer::Impl> {
  Impl(asio::io_context& io, WebOptions o, WebContent c)
      : io(io),
        options(std::move(o)),
        content(std::move(c)),
        auth(options.token, options.require_token),
        acceptor(io),
        timer(io) {}

  asio::io_context& io;
  WebOptions options;
  WebContent content;
  WebAuth auth;
  tcp::acceptor acceptor;
  asio::steady_timer timer;
  uint16_t port = 0;
  std::string where;
  bool closing = false;
  uint64_t next_id = 0;
  std::map<uint64_t, std::weak_ptr<beast::tcp_stream::socket_type>> sockets;  // every connection
  std::map<uint64_t, std::shared_ptr<Viewer>> viewers;
  std::map<uint64_t, Clock::time_point> opened_at;  // when each connection was accepted
  FrameBuilder live_frames;
  std::unique_ptr<ReplayCursor> replay_end;  // the whole recording, for /api/run and /metrics
  Clock::time_point last_tick = Clock::now();

  std::atomic<uint64_t> accepted{0}, refused{0}, requests{0}, viewer_count{0}, dropped{0},
      frames{0}, bytes{0};
  std::atomic<uint64_t> viewer_micros{0};  // closed viewers' connected time
  std::atomic<uint64_t> dropped_pending{0};

  void log(const std::string& line) {
    if (options.log) options.log(line);
  }
  const RunModel& final_model() {
    if (content.live) return *content.live;
    if (!replay_end) {
      replay_end = std::make_unique<ReplayCursor>(content.recording);
      replay_end->seek(1e300);
    }
    return replay_end->model();
  }
  double final_now() {
    if (content.live) return telemetry::now_seconds();
    final_model();
    return replay_end->now();
  }
  std::string api_run() {
    const RunModel& m = final_model();
    std::optional<ReplayPosition> pos;
    if (replay_end) pos = replay_end->position();
    TeachingStatus teaching;
    if (content.teaching) teaching = content.teaching->status();
    return full_state(FrameInput{m, content.info, final_now(), pos ? &*pos : nullptr,
                                 content.teaching ? &teaching : nullptr});
  }
  std::string metrics() {
    const RunModel& m = final_model();
    return prometheus_metrics(MetricsInput{m, content.info.job_name, final_now(),
                                           content.connections ? content.connections() : 0});
  }

  void accept();
  void tick();
  void drop_oldest_pending() {
    const auto now = Clock::now();
    for (auto& [id, weak] : sockets) {
      if (viewers.count(id)) continue;
      // Only one that has had its time (a burst of new viewers is not a flood): none such, and
      // the new one is taken anyway, within max_connections.
      const auto opened = opened_at.find(id);
      if (opened == opened_at.end()) continue;
      if (now - opened->second < options.pending_grace) return;  // later ones are younger
      if (auto socket = weak.lock()) {
        error_code ignored;
        socket->close(ignored);  // its session sees the error and forgets it
      }
      opened_at.erase(id);
      sockets.erase(id);
      dropped_pending.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  void close_all();
  void forget(uint64_t id) {
    sockets.erase(id);
    if (!viewers.count(id)) opened_at.erase(id);
  }
};

namespace {

using ImplPtr = std::shared_ptr<WebServer::Impl>;

// A WebSocket viewer of the dashboard.
class Viewer : public std::enable_shared_from_this<Viewer> {
 public:
  Viewer(ImplPtr server, uint64_t id, beast::tcp_stream stream)
      : server_(std::move(server)), id_(id), ws_(std::move(stream)) {
    if (server_->content.recording) {
      cursor_ = std::make_unique<ReplayCursor>(server_->content.recording);
      // Its own stream, which a paused viewer expects to fall silent: the timeline goes with the
      // frame it changed in (live frames send it at most once per kTimelineSeconds).
      frames_ = std::make_unique<FrameBuilder>(0.0);
    }
  }

  void start(WebRequest request) {
    request_ = std::move(request);                 // the handshake reads it until it completes
    beast::get_lowest_layer(ws_).expires_never();  // the websocket's own timeouts from here on
    websocket::stream_base::timeout t{};
    t.handshake_timeout = std::chrono::seconds(10);
    t.idle_timeout = std::chrono::seconds(30);  // pings a quiet peer; closes a dead one
    t.keep_alive_pings = true;
    ws_.set_option(t);
    ws_.read_message_max(4096);
    ws_.text(true);
    ws_.async_accept(request_, [self = shared_from_this()](error_code ec) {
      if (ec) return self->close();
      self->server_->viewers.emplace(self->id_, self);
      self->opened_ = Clock::now();
      self->server_->viewer_count.fetch_add(1, std::memory_order_relaxed);
      self->read();
    });
  }

  bool writing() const { return writing_; }
  bool stalled(Clock::time_point now) const {
    return writing_ && now - write_started_ > server_->options.viewer_stall;
  }
  uint64_t last_frame() const { return last_frame_; }
  uint64_t connected_micros() const {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - opened_).count());
  }

  // Sends `text` as frame `number` (one write at a time: the caller skips a viewer still writing).
  void send(std::shared_ptr<const std::string> text, uint64_t number) {
    writing_ = true;
    write_started_ = Clock::now();
    last_frame_ = number;
    ws_.async_write(asio::buffer(*text),
                    [self = shared_from_this(), text](error_code ec, size_t n) {
                      self->writing_ = false;
                      if (ec) return self->close();
                      self->server_->frames.fetch_add(1, std::memory_order_relaxed);
                      self->server_->bytes.fetch_add(n, std::memory_order_relaxed);
                    });
  }

  // Replay: advances this viewer's cursor and sends its next frame.
  void replay_tick(double elapsed) {
    cursor_->advance(elapsed);
    const ReplayPosition pos = cursor_->position();
    const bool want_full = last_frame_ != frames_->number() || last_frame_ == 0;
    FrameBuilder::Frame f = frames_->build(
        FrameInput{cursor_->model(), server_->content.info, cursor_->now(), &pos}, want_full);
    if (want_full)
      send(f.full, f.number);
    else if (f.delta)
      send(f.delta, f.number);
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    error_code ignored;
    beast::get_lowest_layer(ws_).socket().shutdown(tcp::socket::shutdown_both, ignored);
    beast::get_lowest_layer(ws_).socket().close(ignored);
    if (server_->viewers.erase(id_)) {
      server_->viewer_count.fetch_sub(1, std::memory_order_relaxed);
      server_->viewer_micros.fetch_add(connected_micros(), std::memory_order_relaxed);
    }
    server_->forget(id_);
  }

  std::shared_ptr<beast::tcp_stream::socket_type> socket_ref() {
    return {shared_from_this(), &beast::get_lowest_layer(ws_).socket()};
  }

 private:
  void read() {
    ws_.async_read(in_, [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->close();
      self->command(beast::buffers_to_string(self->in_.data()));
      self->in_.consume(self->in_.size());
      self->read();
    });
  }

  // {"cmd":"play"|"pause"|"seek"|"speed", ...}: replay only. Live, only a teaching run's
  // {"cmd":"teach","do":"next_phase"|"next_step"|"run"}; anything else is ignored (the web side
  // changes a live run in no other way).
  void command(const std::string& text) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object() || !j.contains("cmd") || !j["cmd"].is_string()) return;
    const std::string cmd = j["cmd"];
    if (!cursor_) {
      const auto& gate = server_->content.teaching;
      if (gate && cmd == "teach" && j.contains("do") && j["do"].is_string())
        if (const auto c = teaching_command(j["do"].get<std::string>())) gate->command(*c);
      return;
    }
    if (cmd == "play") {
      if (cursor_->position().position >= cursor_->position().duration) cursor_->seek(0);
      cursor_->play();
    } else if (cmd == "pause") {
      cursor_->pause();
    } else if (cmd == "seek" && j.contains("t") && j["t"].is_number()) {
      cursor_->seek(j["t"].get<double>());
    } else if (cmd == "speed" && j.contains("x") && j["x"].is_number()) {
      cursor_->set_speed(j["x"].get<double>());
    }
  }

  ImplPtr server_;
  uint64_t id_;
  websocket::stream<beast::tcp_stream> ws_;
  beast::flat_buffer in_;
  WebRequest request_;
  std::unique_ptr<ReplayCursor> cursor_;
  std::unique_ptr<FrameBuilder> frames_;
  bool writing_ = false, closed_ = false;
  Clock::time_point write_started_, opened_;
  uint64_t last_frame_ = 0;
};

// A plain HTTP connection: requests answered in turn (keep-alive) until it closes or upgrades.
class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(ImplPtr server, uint64_t id, tcp::socket socket)
      : server_(std::move(server)), id_(id), stream_(std::move(socket)) {}

  void start() { read(); }
  std::shared_ptr<beast::tcp_stream::socket_type> socket_ref() {
    return {shared_from_this(), &stream_.socket()};
  }

 private:
  void read() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(server_->options.max_header_bytes));
    parser_->body_limit(server_->options.max_body_bytes);
    stream_.expires_after(server_->options.request_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(error_code ec) {
    if (ec == http::error::end_of_stream || ec == asio::error::operation_aborted ||
        ec == beast::error::timeout || ec == asio::error::connection_reset)
      return close();
    if (ec) {
      // Malformed or oversized: answer once, then close, discarding what the client is still
      // sending first (linger()).
      http::status status = http::status::bad_request;
      if (ec == http::error::header_limit) status = http::status::request_header_fields_too_large;
      if (ec == http::error::body_limit) status = http::status::payload_too_large;
      return reply(
          web_error(status, fmt::format("{}: {}", static_cast<unsigned>(status), ec.message())),
          true, true);
    }
    server_->requests.fetch_add(1, std::memory_order_relaxed);
    WebRequest req = parser_->release();
    if (websocket::is_upgrade(req) && target_path(req) == "/ws") {
      if (!server_->auth.allows(req))
        return reply(web_error(http::status::unauthorized,
                               "401: the dashboard's WebSocket needs the job's token"),
                     true);
      if (!same_origin(req))
        return reply(web_error(http::status::forbidden,
                               "403: a WebSocket from another site's page is refused"),
                     true);
      server_->forget(id_);
      auto viewer = std::make_shared<Viewer>(server_, id_, std::move(stream_));
      server_->sockets[id_] = viewer->socket_ref();
      server_->opened_at[id_] = Clock::now();  // in its WebSocket handshake: not yet a viewer
      viewer->start(std::move(req));
      return;
    }
    WebRoutesContext ctx{server_->auth, [this] { return server_->api_run(); },
                         [this] { return server_->metrics(); }};
    reply(web_respond(req, ctx), !req.keep_alive());
  }

  // A page of another origin must not open the socket with this browser's cookie.
  static bool same_origin(const WebRequest& req) {
    const auto origin = req.find(http::field::origin);
    if (origin == req.end()) return true;  // not a browser (scripts, tests)
    const auto host = req.find(http::field::host);
    if (host == req.end()) return false;
    const std::string_view o = to_std(origin->value());
    const size_t scheme = o.find("://");
    return scheme != std::string_view::npos && o.substr(scheme + 3) == to_std(host->value());
  }

  // `unread`: the request was refused before its end was read; close by linger().
  void reply(WebResponse res, bool close_after, bool unread = false) {
    res_ = std::make_shared<WebResponse>(std::move(res));
    if (close_after) res_->keep_alive(false);
    stream_.expires_after(server_->options.request_timeout);
    http::async_write(stream_, *res_,
                      [self = shared_from_this(), close_after, unread](error_code ec, size_t) {
                        if (ec) return self->close();
                        if (close_after) return unread ? self->linger() : self->close();
                        self->read();
                      });
  }

  // After refusing a request whose rest is still coming (a 413's body, a 431's headers): closing
  // a socket with unread input makes the kernel send RST, and a client still sending then sees
  // "connection reset" instead of the answer (which the RST may also discard unsent). So the
  // sending side is shut (the client reads the answer, then EOF) and what arrives is read and
  // dropped until the client closes, for at most kLingerBytes or kLingerTime, then it closes.
  // Asynchronous: the stream's own timer ends the wait, nothing blocks the io_context.
  static constexpr size_t kLingerBytes = size_t{1} << 20;
  static constexpr auto kLingerTime = std::chrono::seconds(1);
  void linger() {
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    buffer_.clear();  // (keeps its storage, reused for what is dropped)
    stream_.expires_after(kLingerTime);
    drain(0);
  }
  void drain(size_t drained) {
    stream_.async_read_some(buffer_.prepare(16 * 1024),
                            [self = shared_from_this(), drained](error_code ec, size_t n) {
                              // EOF (the client is done), the deadline, the byte budget, or the
                              // server closing.
                              if (ec || drained + n >= kLingerBytes) return self->close();
                              self->drain(drained + n);
                            });
  }

  void close() {
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.close();
    server_->forget(id_);
  }

  ImplPtr server_;
  uint64_t id_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<WebResponse> res_;
};

}  // namespace

void WebServer::Impl::accept() {
  acceptor.async_accept([self = shared_from_this()](error_code ec, tcp::socket socket) {
    if (self->closing || ec == asio::error::operation_aborted) return;
    if (ec) {
      self->log(fmt::format("web server on {}: accept failed: {}", self->where, ec.message()));
    } else if (self->sockets.size() >= self->options.max_connections) {
      self->refused.fetch_add(1, std::memory_order_relaxed);
      error_code ignored;
      self->log(fmt::format("web server on {}: refused a connection from {}: already {} open",
                            self->where, socket.remote_endpoint(ignored).address().to_string(),
                            self->sockets.size()));
      socket.close(ignored);
    } else {
      self->accepted.fetch_add(1, std::memory_order_relaxed);
      error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      // Connections that are not (yet) viewers are capped lower: the oldest of them goes, so
      // idle or slow clients cannot keep a viewer, or Prometheus, out (as the collector does with
      // peers in their handshake).
      if (self->sockets.size() >= self->viewers.size() + self->options.max_pending)
        self->drop_oldest_pending();
      const uint64_t id = self->next_id++;
      auto session = std::make_shared<HttpSession>(self, id, std::move(socket));
      self->sockets[id] = session->socket_ref();
      self->opened_at[id] = Clock::now();
      session->start();
    }
    if (ec) {
      // Out of descriptors and the like: try again shortly instead of spinning.
      auto retry = std::make_shared<asio::steady_timer>(self->io, std::chrono::milliseconds(100));
      retry->async_wait([self, retry](error_code e) {
        if (!e && !self->closing) self->accept();
      });
      return;
    }
    self->accept();
  });
}

void WebServer::Impl::tick() {
  if (closing) return;
  const Clock::time_point now = Clock::now();
  const double elapsed = std::chrono::duration<double>(now - last_tick).count();
  last_tick = now;
  // Viewers that stopped reading go; the rest get a frame unless still writing the last one.
  std::vector<std::shared_ptr<Viewer>> ready;
  for (auto it = viewers.begin(); it != viewers.end();) {
    auto v = (it++)->second;
    if (v->stalled(now)) {
      dropped.fetch_add(1, std::memory_order_relaxed);
      log(fmt::format("web server on {}: dropped a viewer that stopped reading", where));
      v->close();
    } else if (!v->writing()) {
      ready.push_back(v);
    }
  }
  if (content.recording) {
    for (auto& v : ready) v->replay_tick(elapsed);
  } else if (content.live && !ready.empty()) {
    bool want_full = false;
    for (auto& v : ready)
      want_full |= v->last_frame() != live_frames.number() || v->last_frame() == 0;
    TeachingStatus teaching;
    if (content.teaching) {
      content.teaching->viewer_seen();  // a page is connected: the run has a viewer
      teaching = content.teaching->status();
    }
    const FrameBuilder::Frame f =
        live_frames.build(FrameInput{*content.live, content.info, telemetry::now_seconds(), nullptr,
                                     content.teaching ? &teaching : nullptr},
                          want_full);
    for (auto& v : ready) {
      if (v->last_frame() == f.number) continue;  // nothing new for it
      if (f.delta && v->last_frame() + 1 == f.number)
        v->send(f.delta, f.number);
      else if (f.full)
        v->send(f.full, f.number);
    }
  }
  timer.expires_after(options.frame_interval);
  timer.async_wait([self = shared_from_this()](error_code ec) {
    if (!ec) self->tick();
  });
}

void WebServer::Impl::close_all() {
  if (closing) return;
  closing = true;
  error_code ignored;
  acceptor.close(ignored);
  timer.cancel();
  auto all_viewers = viewers;
  for (auto& [id, v] : all_viewers) v->close();
  auto all = sockets;
  sockets.clear();
  for (auto& [id, weak] : all)
    if (auto s = weak.lock()) s->close(ignored);
}

WebServer::WebServer(asio::io_context& io, WebOptions options, WebContent content) {
  SL_ENFORCE(content.live || content.recording,
             "web server: nothing to show (neither a live run nor a recording)");
  impl_ = std::make_shared<Impl>(io, std::move(options), std::move(content));
  Impl& d = *impl_;
  SL_ENFORCE(!d.options.require_token || !d.options.token.empty(),
             "web server on {}:{}: a token is required off loopback, and there is none",
             d.options.address, d.options.port);
  d.port = listen_on(d.acceptor, d.options.address == "localhost" ? "127.0.0.1" : d.options.address,
                     d.options.port, "--http")
               .port();
  d.where = fmt::format("{}:{}", d.options.address, d.port);
}

WebServer::~WebServer() = default;

uint16_t WebServer::port() const {
  return impl_->port;
}

std::string WebServer::url() const {
  std::string host = impl_->options.address;
  if (host == "0.0.0.0") host = "127.0.0.1";
  if (host == "::") host = "::1";
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return fmt::format("http://{}:{}/", host, impl_->port);
}

void WebServer::start() {
  asio::post(impl_->io, [d = impl_] {
    d->accept();
    d->last_tick = Clock::now();
    d->tick();
  });
}

void WebServer::close() {
  impl_->close_all();
}

std::function<void()> WebServer::closer() const {
  return [d = impl_] { d->close_all(); };
}

WebStats WebServer::stats() const {
  const Impl& d = *impl_;
  WebStats s;
  s.accepted = d.accepted.load();
  s.refused = d.refused.load();
  s.requests = d.requests.load();
  s.viewers_open = d.viewer_count.load();
  s.dropped = d.dropped.load();
  s.dropped_pending = d.dropped_pending.load();
  s.frames = d.frames.load();
  s.bytes = d.bytes.load();
  // Closed viewers' time is summed as they close; open ones are counted up to now when read on the
  // server's thread (stats() from elsewhere leaves them out rather than race on the map).
  s.viewer_seconds = static_cast<double>(d.viewer_micros.load()) * 1e-6;
  return s;
}

}  // namespace shardlab::net
