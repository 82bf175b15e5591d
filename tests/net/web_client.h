// Beast clients of the web server on loopback, for the suites that talk to it (tst_web_routes,
// tst_web_viewers). Each client runs its own io_context on the test's thread and every operation
// has a deadline (kOpTimeout, Beast's stream timeouts, run_one_for / run_for): a client never
// waits without one.
//   HttpConn: one HTTP connection: requests, raw bytes, and reading until the server closes it.
//   request() / get(): one request on a fresh connection, answered as a Reply (describe() for
//     failure messages).
//   WsClient: a WebSocket viewer (handshake headers and a small receive buffer on demand) whose
//     messages are queued as they come and taken with next(timeout).
#pragma once

#include <QString>

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility> (GCC 12, C++20).
#include <utility>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include "net/web/web_routes.h"
#include "tests/net/loopback.h"

namespace shardlab::test {

using Clock = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

inline constexpr auto kOpTimeout = std::chrono::seconds(5);  // any one client operation

// Seconds from `t` to now.
inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// ---- An HTTP client: one connection, every operation bounded ----

class HttpConn {
 public:
  using error_code = boost::system::error_code;

  explicit HttpConn(uint16_t port) : port_(port) {}

  error_code connect() {
    return run(
        [&](auto h) { stream_.async_connect(loopback(port_), [h](error_code ec) { h(ec, 0); }); });
  }
  error_code write(net::WebRequest req) {
    req.prepare_payload();
    req_ = std::move(req);
    return run([&](auto h) { net::http::async_write(stream_, req_, h); });
  }
  error_code write_raw(const std::string& bytes) {
    raw_ = bytes;
    return run([&](auto h) { boost::asio::async_write(stream_, boost::asio::buffer(raw_), h); });
  }
  error_code read(net::WebResponse& res, bool head = false) {
    net::http::response_parser<net::http::string_body> parser;
    parser.body_limit(64 << 20);
    parser.skip(head);  // a response to HEAD has no body whatever its Content-Length says
    const error_code ec = run([&](auto h) { net::http::async_read(stream_, buffer_, parser, h); });
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
      if (left <= ms(0)) return false;
      std::array<char, 4096> chunk{};
      size_t n = 0;
      const error_code ec = run(
          [&](auto h) {
            stream_.async_read_some(boost::asio::buffer(chunk), [h, &n](error_code e, size_t k) {
              n = k;
              h(e, k);
            });
          },
          left);
      total += n;
      if (bytes) *bytes = total;
      if (ec == boost::beast::error::timeout) return false;
      if (ec) return true;  // eof, connection_reset, ...
    }
  }
  boost::asio::ip::tcp::socket& socket() { return stream_.socket(); }

 private:
  // Starts an operation with handler h(ec, n) and runs until it completes; the stream's own
  // timer closes the socket at the deadline (beast::error::timeout).
  template <class Start>
  error_code run(Start&& start, ms timeout = std::chrono::duration_cast<ms>(kOpTimeout)) {
    error_code result = boost::beast::error::timeout;
    bool done = false;
    stream_.expires_after(timeout);
    start([&](error_code ec, size_t) {
      result = ec;
      done = true;
    });
    io_.restart();
    io_.run_for(timeout + std::chrono::seconds(2));
    if (!done) {
      error_code ignored;
      stream_.socket().close(ignored);
      io_.restart();
      io_.run_for(std::chrono::seconds(2));
    }
    stream_.expires_never();
    return result;
  }

  uint16_t port_;
  boost::asio::io_context io_;
  boost::beast::tcp_stream stream_{io_};
  boost::beast::flat_buffer buffer_;
  net::WebRequest req_;
  std::string raw_;
};

// ---- One request on a fresh connection ----

struct Reply {
  boost::system::error_code ec;
  net::WebResponse res;
  unsigned status() const { return ec ? 0 : res.result_int(); }
  std::string header(net::http::field f) const {
    const auto it = res.find(f);
    return it == res.end() ? std::string() : std::string(net::to_std(it->value()));
  }
  std::string header(const char* name) const {
    const auto it = res.find(name);
    return it == res.end() ? std::string() : std::string(net::to_std(it->value()));
  }
  const std::string& body() const { return res.body(); }
};

using HeaderList = std::vector<std::pair<net::http::field, std::string>>;

inline Reply request(uint16_t port, net::http::verb method, const std::string& target,
                     const HeaderList& headers = {}, const std::string& body = "") {
  HttpConn c(port);
  Reply r;
  if ((r.ec = c.connect())) return r;
  net::WebRequest req{method, target, 11};
  req.set(net::http::field::host, "127.0.0.1:" + std::to_string(port));
  req.set(net::http::field::user_agent, "shardlab-test-client");
  for (const auto& [f, v] : headers) req.set(f, v);
  req.keep_alive(false);
  req.body() = body;
  if ((r.ec = c.write(std::move(req)))) return r;
  r.ec = c.read(r.res, method == net::http::verb::head);
  return r;
}

inline Reply get(uint16_t port, const std::string& target, const HeaderList& headers = {}) {
  return request(port, net::http::verb::get, target, headers);
}

// "STATUS first 300 bytes of the body", or why there was no reply.
inline QString describe(const Reply& r) {
  if (r.ec) return QString("no reply: %1").arg(QString::fromStdString(r.ec.message()));
  return QString("%1 %2").arg(r.status()).arg(QString::fromStdString(r.body().substr(0, 300)));
}

// ---- A WebSocket viewer, run on the test's thread ----

class WsClient {
 public:
  using error_code = boost::system::error_code;

  explicit WsClient(uint16_t port) : port_(port) {}
  ~WsClient() {
    error_code ignored;
    boost::beast::get_lowest_layer(ws_).socket().close(ignored);
    io_.restart();
    io_.run_for(std::chrono::seconds(2));
  }
  // Before connect(): headers for the handshake request, and a small receive buffer.
  HeaderList headers;
  int receive_buffer = 0;

  // Connects and upgrades; `status`: the server's answer (101 when upgraded).
  error_code connect(unsigned* status = nullptr) {
    auto& s = boost::beast::get_lowest_layer(ws_);
    if (receive_buffer > 0) {
      error_code ec;
      s.socket().open(boost::asio::ip::tcp::v4(), ec);
      if (ec) return ec;
      s.socket().set_option(boost::asio::socket_base::receive_buffer_size(receive_buffer), ec);
      if (ec) return ec;
    }
    error_code ec = run([&](auto h) {
      s.expires_after(kOpTimeout);
      s.async_connect(loopback(port_), [h](error_code e) { h(e); });
    });
    if (ec) return ec;
    ws_.set_option(boost::beast::websocket::stream_base::decorator(
        [h = headers](boost::beast::websocket::request_type& req) {
          for (const auto& [f, v] : h) req.set(f, v);
        }));
    boost::beast::websocket::response_type res;
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
      messages_.push_back(boost::beast::buffers_to_string(in_.data()));
      in_.consume(in_.size());
      start_reading();
    });
  }
  // The next message within `timeout`; nullopt when none came or the socket closed.
  std::optional<std::string> next(ms timeout) {
    const auto deadline = Clock::now() + timeout;
    while (messages_.empty() && reading_ && !closed_) {
      const auto left = deadline - Clock::now();
      if (left <= Clock::duration::zero()) break;
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
    return run([&](auto h) {
      ws_.async_write(boost::asio::buffer(*out_), [h](error_code e, size_t) { h(e); });
    });
  }
  bool closed() const { return closed_; }
  error_code close_reason() const { return close_reason_; }
  size_t queued() const { return messages_.size(); }

 private:
  // Starts an operation with handler h(ec) and runs until it completes, closing the socket
  // when it has not within kOpTimeout + 2 s.
  template <class Start>
  error_code run(Start&& start) {
    error_code result = boost::beast::error::timeout;
    bool done = false;
    start([&](error_code ec) {
      result = ec;
      done = true;
    });
    const auto deadline = Clock::now() + kOpTimeout + std::chrono::seconds(2);
    while (!done && Clock::now() < deadline) {
      if (io_.stopped()) io_.restart();
      io_.run_one_for(deadline - Clock::now());
    }
    if (!done) {
      error_code ignored;
      boost::beast::get_lowest_layer(ws_).socket().close(ignored);
      while (!done) {
        if (io_.stopped()) io_.restart();
        if (io_.run_one_for(std::chrono::seconds(2)) == 0) break;
      }
    }
    return result;
  }

  uint16_t port_;
  boost::asio::io_context io_;
  boost::beast::websocket::stream<boost::beast::tcp_stream> ws_{io_};
  boost::beast::flat_buffer in_;
  std::deque<std::string> messages_;
  std::shared_ptr<std::string> out_;
  bool reading_ = false, closed_ = false;
  error_code close_reason_;
};

}  // namespace shardlab::test
