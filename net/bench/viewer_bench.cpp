#include "net/bench/viewer_bench.h"

#include <atomic>
#include <thread>
#include <utility>  // before Boost.Asio: its awaitable.hpp uses std::exchange (Boost 1.74, GCC 12)
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

namespace shardlab::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct BenchViewers::Impl {
  Impl(uint16_t port, int count) {
    for (int i = 0; i < count; ++i) {
      auto v = std::make_shared<Viewer>(io_);
      viewers_.push_back(v);
      v->ws.next_layer().connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
      v->ws.handshake("127.0.0.1", "/ws");
      read(v);
    }
    thread_ = std::thread([this] { io_.run(); });
  }
  // Waits until every viewer has its first frame (false after 30 s).
  bool wait_first(std::chrono::seconds timeout = std::chrono::seconds(30)) {
    const auto end = Clock::now() + timeout;
    while (Clock::now() < end) {
      bool all = true;
      for (auto& v : viewers_) all &= v->frames.load() > 0;
      if (all) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  uint64_t frames() const {
    uint64_t n = 0;
    for (auto& v : viewers_) n += v->frames.load();
    return n;
  }
  uint64_t bytes() const {
    uint64_t n = 0;
    for (auto& v : viewers_) n += v->bytes.load();
    return n;
  }
  void stop() {
    if (!thread_.joinable()) return;
    asio::post(io_, [this] {
      for (auto& v : viewers_) {
        boost::system::error_code ignored;
        v->ws.next_layer().close(ignored);
      }
    });
    thread_.join();
  }

  struct Viewer {
    explicit Viewer(asio::io_context& io) : ws(io) {}
    websocket::stream<tcp::socket> ws;
    beast::flat_buffer buffer;
    std::atomic<uint64_t> frames{0}, bytes{0};
  };
  void read(const std::shared_ptr<Viewer>& v) {
    v->ws.async_read(v->buffer, [this, v](boost::system::error_code ec, size_t n) {
      if (ec) return;
      v->frames.fetch_add(1);
      v->bytes.fetch_add(n);
      v->buffer.consume(v->buffer.size());
      read(v);
    });
  }
  asio::io_context io_;
  std::vector<std::shared_ptr<Viewer>> viewers_;
  std::thread thread_;
};

BenchViewers::BenchViewers(uint16_t port, int count) : impl_(std::make_unique<Impl>(port, count)) {}
BenchViewers::~BenchViewers() {
  stop();
}
bool BenchViewers::wait_first(std::chrono::seconds timeout) {
  return impl_->wait_first(timeout);
}
uint64_t BenchViewers::frames() const {
  return impl_->frames();
}
uint64_t BenchViewers::bytes() const {
  return impl_->bytes();
}
void BenchViewers::stop() {
  impl_->stop();
}

}  // namespace shardlab::net
