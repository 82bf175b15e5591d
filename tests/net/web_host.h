// The web server under test (net/web/web_server.h) on its own io_context and thread, for the
// suites that talk to it over loopback (tst_web_routes, tst_web_viewers, tst_plan_api): live()
// is the content that serves a run model, WebHost starts the server on port 0, runs work on its
// thread (call() waits with a deadline, post() does not), and closes it when it goes, stopping
// the thread's io_context outright when it does not end within 3 s.
#pragma once

#include <QtGlobal>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <thread>

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility> (GCC 12, C++20).
#include <utility>

#include <boost/asio.hpp>

#include "net/web/web_server.h"

namespace shardlab::test {

// What a server serves of a live run: `model`, read on the server's thread.
inline net::WebContent live(const net::RunModel& model) {
  net::WebContent content;
  content.live = &model;
  return content;
}

class WebHost {
 public:
  WebHost(net::WebOptions options, net::WebContent content)
      : web_(std::make_unique<net::WebServer>(io_, std::move(options), std::move(content))) {
    web_->start();
    thread_ = std::thread([this] {
      io_.run();
      done_.set_value();
    });
  }
  ~WebHost() { stop(); }
  net::WebServer& web() { return *web_; }
  uint16_t port() const { return web_->port(); }
  boost::asio::io_context& io() { return io_; }
  // Runs f on the server's thread and waits for it (false when it did not run within 10 s).
  bool call(const std::function<void()>& f) {
    auto p = std::make_shared<std::promise<void>>();
    auto fut = p->get_future();
    boost::asio::post(io_, [f, p] {
      f();
      p->set_value();
    });
    return fut.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  }
  void post(std::function<void()> f) { boost::asio::post(io_, std::move(f)); }
  // Closes the server on its thread, lets the thread end (stopping it after 3 s), joins.
  void stop() {
    if (!thread_.joinable()) return;
    call([this] { web_->close(); });
    work_.reset();
    auto fut = done_.get_future();
    if (fut.wait_for(std::chrono::seconds(3)) != std::future_status::ready) {
      qWarning("web server thread still busy 3 s after close(): stopping its io_context");
      io_.stop();
    }
    thread_.join();
  }

 private:
  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_{
      boost::asio::make_work_guard(io_)};
  std::unique_ptr<net::WebServer> web_;
  std::promise<void> done_;
  std::thread thread_;
};

}  // namespace shardlab::test
