#include "net/web/web_thread.h"

#include <chrono>
#include <thread>
#include <utility>  // before Boost.Asio: its awaitable.hpp uses std::exchange (Boost 1.74, GCC 12)

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

namespace shardlab::net {

struct WebServerThread::Impl {
  Impl(WebOptions options, WebContent content) : web(io, std::move(options), std::move(content)) {}
  boost::asio::io_context io;
  WebServer web;
  std::thread thread;
};

WebServerThread::WebServerThread(WebOptions options, WebContent content)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(content))) {}

WebServerThread::~WebServerThread() {
  stop();
}

WebServer& WebServerThread::server() {
  return impl_->web;
}

void WebServerThread::start() {
  if (impl_->thread.joinable()) return;
  impl_->web.start();
  impl_->thread = std::thread([d = impl_.get()] { d->io.run(); });
}

void WebServerThread::stop() {
  Impl& d = *impl_;
  if (!d.thread.joinable()) return;
  boost::asio::post(d.io, [&d] { d.web.close(); });
  // The sockets closed, their handlers finish and run() returns; a stuck one is cut off.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!d.io.stopped() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  d.io.stop();
  d.thread.join();
}

}  // namespace shardlab::net
