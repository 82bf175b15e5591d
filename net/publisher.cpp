// The publisher's thread owns an io_context and drives it one operation at a time with a deadline
// (run_one_for in short slices), so every connect, read and write is bounded and close() can cut
// any of them short. publish() only pushes into a lock-free bounded queue (no lock, no
// allocation, no system call on the rank's thread); the thread numbers, encodes, seals and writes.
//
// Delivery: a batch leaves the queue only for the duration of one write. When the write fails,
// the events whose sealed run the kernel did not fully take are kept (in order, before anything
// still queued) and sent again after reconnecting; those it took count as sent. Before every write
// the socket is polled: the collector never speaks after AUTH_OK, so readability means it has
// closed, and nothing is written into a dead connection. What remains possible is a collector dying
// with frames in its receive buffer (the protocol has no acknowledgements): those are lost, never
// duplicated.
#include "net/publisher.h"

#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <variant>

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility> (GCC 12, C++20).
#include <utility>

#include <boost/asio.hpp>

#include "engine/core/error.h"
#include "engine/telemetry/event_queue.h"
#include "net/auth.h"
#include "net/handshake.h"

namespace shardlab::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kConnectTimeout = std::chrono::seconds(3);
constexpr auto kHandshakeTimeout = std::chrono::seconds(5);
constexpr auto kWriteTimeout = std::chrono::seconds(10);
// How often an idle connection is checked for a collector that went away.
constexpr auto kLivenessPoll = std::chrono::milliseconds(200);
// Slices in which the io_context runs, so a close() deadline is noticed promptly.
constexpr auto kSlice = std::chrono::milliseconds(50);
// CHALLENGE and AUTH_OK are tiny; anything bigger during the handshake is not a collector.
constexpr uint32_t kMaxHandshakePayload = 4096;

void clamp(std::string& s) {
  if (s.size() > kMaxString) s.resize(kMaxString);
}

// Over-long strings would make encode() throw on the publisher thread; cut them instead so the
// event (and its sequence number) still arrives.
void clamp_strings(telemetry::Event& event) {
  std::visit(
      [](auto& p) {
        using T = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<T, telemetry::LogLineEvent>) clamp(p.text);
        if constexpr (std::is_same_v<T, telemetry::CollectiveEvent>) {
          clamp(p.op);
          clamp(p.group);
        }
        if constexpr (std::is_same_v<T, telemetry::JobStateEvent>) clamp(p.reason);
      },
      event.payload);
}

struct OpState {
  std::optional<error_code> ec;
  size_t bytes = 0;
  tcp::resolver::results_type endpoints;
  std::vector<uint8_t> buffer;  // owned here so a late completion never writes into freed memory
};

}  // namespace

void parse_host_port(const std::string& text, std::string& host, uint16_t& port,
                     const std::string& flag, bool allow_any_port) {
  auto bad = [&]() {
    SL_THROW(InvalidArgument, "{}: expected HOST:PORT (port {}..65535), got '{}'", flag,
             allow_any_port ? 0 : 1, text);
  };
  std::string h, p;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') bad();
    h = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos) bad();
    h = text.substr(0, colon);
    p = text.substr(colon + 1);
    if (h.find(':') != std::string::npos) bad();  // a bare IPv6 address needs brackets
  }
  if (h.empty() || p.empty() || p.size() > 5) bad();
  unsigned long value = 0;
  for (char c : p) {
    if (c < '0' || c > '9') bad();
    value = value * 10 + static_cast<unsigned long>(c - '0');
  }
  if (value < (allow_any_port ? 0 : 1) || value > 65535) bad();
  host = h;
  port = static_cast<uint16_t>(value);
}

struct Publisher::Impl {
  PublisherOptions o;
  std::string where;  // "host:port" for messages

  // Shared with publish() and close().
  mutable std::mutex m;
  std::condition_variable cv;
  std::unique_ptr<telemetry::BoundedQueue<telemetry::Event>> queue;  // from publish()
  std::atomic<bool> closing_flag{false};                             // what publish() reads
  bool closing = false;  // under m, for the thread's waits

  // The thread's own: events of a failed write, sent again before the queue's; the next number.
  std::deque<telemetry::Event> retry;
  uint64_t next_seq = 0;
  std::string last_error;
  std::atomic<uint64_t> published{0}, sent{0}, dropped{0};
  std::atomic<bool> connected{false};
  // close()'s deadline in steady-clock ticks; max while not closing (read by the thread often).
  std::atomic<Clock::rep> close_deadline{Clock::time_point::max().time_since_epoch().count()};

  // The publisher thread's.
  asio::io_context io;
  tcp::socket socket{io};
  tcp::resolver resolver{io};
  std::optional<BatchSealer> sealer;    // the connection's, once authenticated
  uint16_t version = kProtocolVersion;  // the one the collector chose, once authenticated

  std::thread thread;
  std::mutex close_mutex;
  bool joined = false;

  Clock::time_point deadline_of_close() const {
    return Clock::time_point(Clock::duration(close_deadline.load()));
  }

  void set_error(std::string text) {
    std::lock_guard lock(m);
    last_error = std::move(text);
  }

  // Runs the io_context until the operation started by `start` completes (its handler sets the
  // state's ec), `deadline` passes or close()'s deadline passes; then `cancel` and a bounded
  // drain. Handlers own their state, so a completion arriving late is harmless.
  template <class Start, class Cancel>
  std::shared_ptr<OpState> run_op(Start&& start, Clock::time_point deadline, Cancel&& cancel,
                                  std::shared_ptr<OpState> st = nullptr) {
    if (!st) st = std::make_shared<OpState>();
    start(st);
    while (!st->ec) {
      const auto limit = std::min(deadline, deadline_of_close());
      const auto now = Clock::now();
      if (now >= limit) {
        cancel();
        io.restart();
        io.run_for(std::chrono::milliseconds(100));
        if (!st->ec || *st->ec == asio::error::operation_aborted) st->ec = asio::error::timed_out;
        break;
      }
      io.restart();
      io.run_one_for(std::min<Clock::duration>(limit - now, kSlice));
    }
    return st;
  }

  void close_socket() {
    connected = false;
    error_code ignored;
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
  }

  // Reads one whole frame (handshake only) and decodes it.
  std::optional<Message> read_frame(Clock::time_point deadline, std::string& err) {
    auto cancel = [this] { close_socket(); };
    auto st = run_op(
        [this](const std::shared_ptr<OpState>& s) {
          s->buffer.resize(kHeaderSize);
          asio::async_read(socket, asio::buffer(s->buffer), [s](const error_code& ec, size_t n) {
            s->bytes = n;
            s->ec = ec;
          });
        },
        deadline, cancel);
    if (*st->ec) {
      err = *st->ec == asio::error::timed_out ? "timed out" : st->ec->message();
      return std::nullopt;
    }
    FrameHeader header;
    std::memcpy(&header, st->buffer.data(), kHeaderSize);
    if (header.length > kMaxHandshakePayload) {
      err = fmt::format("a handshake frame of {} bytes", header.length);
      return std::nullopt;
    }
    if (header.length > 0) {
      st->ec.reset();
      run_op(
          [this, &header](const std::shared_ptr<OpState>& s) {
            s->buffer.resize(kHeaderSize + header.length);
            asio::async_read(socket, asio::buffer(s->buffer.data() + kHeaderSize, header.length),
                             [s](const error_code& ec, size_t n) {
                               s->bytes = n;
                               s->ec = ec;
                             });
          },
          deadline, cancel, st);
      if (*st->ec) {
        err = *st->ec == asio::error::timed_out ? "timed out" : st->ec->message();
        return std::nullopt;
      }
    }
    DecodeResult r = decode_frame(st->buffer, kMaxHandshakePayload);
    if (r.status != DecodeResult::Status::ok) {
      err = r.status == DecodeResult::Status::error ? r.error : "incomplete frame";
      return std::nullopt;
    }
    return std::move(r.message);
  }

  bool write_all(const std::vector<uint8_t>& bytes, Clock::time_point deadline, size_t& written,
                 std::string& err) {
    auto st = run_op(
        [this, &bytes](const std::shared_ptr<OpState>& s) {
          asio::async_write(socket, asio::buffer(bytes), [s](const error_code& ec, size_t n) {
            s->bytes = n;
            s->ec = ec;
          });
        },
        deadline, [this] { close_socket(); });
    written = st->bytes;
    if (*st->ec) {
      err = *st->ec == asio::error::timed_out ? "timed out" : st->ec->message();
      return false;
    }
    return true;
  }

  // Connects and runs the handshake; on failure says why in `err`.
  bool connect_and_handshake(std::string& err) {
    close_socket();
    const auto start = Clock::now();
    std::vector<tcp::endpoint> endpoints;
    error_code ec;
    const auto address = asio::ip::make_address(o.host, ec);
    if (!ec) {
      endpoints.emplace_back(address, o.port);
    } else {
      auto st = run_op(
          [this](const std::shared_ptr<OpState>& s) {
            resolver.async_resolve(o.host, std::to_string(o.port),
                                   [s](const error_code& e, tcp::resolver::results_type r) {
                                     s->endpoints = std::move(r);
                                     s->ec = e;
                                   });
          },
          start + kConnectTimeout, [this] { resolver.cancel(); });
      if (*st->ec) {
        err = fmt::format("cannot resolve {}: {}", where, st->ec->message());
        return false;
      }
      for (const auto& entry : st->endpoints) endpoints.push_back(entry.endpoint());
    }
    auto st = run_op(
        [this, &endpoints](const std::shared_ptr<OpState>& s) {
          asio::async_connect(socket, endpoints,
                              [s](const error_code& e, const tcp::endpoint&) { s->ec = e; });
        },
        start + kConnectTimeout, [this] { close_socket(); });
    if (*st->ec) {
      err = fmt::format("cannot connect to {}: {}", where, st->ec->message());
      return false;
    }
    socket.set_option(tcp::no_delay(true), ec);

    const auto deadline = Clock::now() + kHandshakeTimeout;
    size_t written = 0;
    std::string why;
    std::optional<WorkerHandshake> handshake;
    try {
      handshake.emplace(o.token, o.hello);
    } catch (const std::exception& e) {  // the OS's random source failed
      err = fmt::format("cannot start the handshake with {}: {}", where, e.what());
      return false;
    }
    if (!write_all(handshake->hello_frame(), deadline, written, why)) {
      err = fmt::format("sending HELLO to {} failed: {}", where, why);
      return false;
    }
    auto challenge = read_frame(deadline, why);
    if (!challenge) {
      err = fmt::format("collector {} refused the HELLO (protocol versions {} to {}): {}", where,
                        kOldestLiveVersion, kProtocolVersion, why);
      return false;
    }
    auto* c = std::get_if<Challenge>(&*challenge);
    if (!c) {
      err = fmt::format("collector {} sent something other than CHALLENGE", where);
      return false;
    }
    std::vector<uint8_t> auth;
    try {
      auth = handshake->answer(*c);
    } catch (const std::exception& e) {
      err = fmt::format("collector {}: {}", where, e.what());
      return false;
    }
    if (!write_all(auth, deadline, written, why)) {
      err = fmt::format("sending AUTH to {} failed: {}", where, why);
      return false;
    }
    auto ok = read_frame(deadline, why);
    if (!ok || !std::holds_alternative<AuthOk>(*ok)) {
      // No AUTH_OK (closed, or silence until the timeout): the token was not accepted.
      err = fmt::format("collector {} refused authentication (wrong token?): {}", where,
                        ok ? std::string("unexpected reply") : why);
      return false;
    }
    sealer.emplace(handshake->session_key(), c->version);
    version = c->version;
    connected = true;
    return true;
  }

  // True while the collector has not closed: it never sends after AUTH_OK, so readability (or an
  // error or hang-up) means the connection is gone.
  bool alive() {
    pollfd p{};
    p.fd = socket.native_handle();
    p.events = POLLIN;
#ifdef POLLRDHUP
    p.events |= POLLRDHUP;
#endif
    if (::poll(&p, 1, 0) < 0) return true;  // EINTR and friends: let the write decide
    return p.revents == 0;
  }

  // Waits up to `d` (or until close() begins); true when closing.
  bool wait_or_closing(Clock::duration d) {
    std::unique_lock lock(m);
    return cv.wait_for(lock, d, [this] { return closing; });
  }

  // Moves up to batch_max events into `batch`: first those of a failed write, then the queue's,
  // numbered here (so the numbers follow the order sent, with no gaps).
  void take_batch(std::vector<telemetry::Event>& batch) {
    while (!retry.empty() && batch.size() < o.batch_max) {
      batch.push_back(std::move(retry.front()));
      retry.pop_front();
    }
    telemetry::Event e;
    while (batch.size() < o.batch_max && queue->pop(e)) {
      e.seq = next_seq++;
      batch.push_back(std::move(e));
    }
  }

  // Streams the queue until the connection fails (false, `err` says why) or close() has flushed
  // or run out of time (true). A batch is written at most every flush_interval unless a full one
  // is waiting: few large writes, and few wake-ups for the collector.
  bool stream(std::string& err) {
    auto last_write = Clock::now();
    auto last_check = Clock::now();
    std::vector<telemetry::Event> batch;
    std::vector<size_t> ends;  // end offset of each encoded frame
    std::vector<uint8_t> bytes;
    for (;;) {
      batch.clear();
      take_batch(batch);
      if (batch.empty()) {
        if (closing_flag.load()) return true;
        const auto now = Clock::now();
        if (now >= last_write + o.heartbeat) {
          telemetry::Event hb;
          hb.rank = o.hello.rank;
          hb.seq = next_seq++;
          hb.time = telemetry::now_seconds();
          hb.payload = telemetry::HeartbeatEvent{};
          batch.push_back(std::move(hb));
          published.fetch_add(1, std::memory_order_relaxed);
        } else {
          if (now - last_check >= kLivenessPoll) {
            if (!alive()) {
              err = fmt::format("collector {} closed the connection", where);
              return false;
            }
            last_check = now;
          }
          wait_or_closing(o.flush_interval);
          continue;
        }
      }
      if (closing_flag.load() && Clock::now() >= deadline_of_close()) {
        for (size_t i = batch.size(); i-- > 0;) retry.push_front(std::move(batch[i]));
        return true;
      }
      bytes.clear();
      ends.clear();
      // Runs of at most kSealBytes, each closed by its BATCH_MAC; ends[i] is the end of the
      // BATCH_MAC that seals event i (the collector takes an event only with its run).
      size_t run_bytes = 0, run_events = 0;
      auto seal_run = [&] {
        sealer->seal(bytes, run_bytes);
        for (size_t j = ends.size() - run_events; j < ends.size(); ++j) ends[j] = bytes.size();
        run_bytes = bytes.size();
        run_events = 0;
      };
      for (size_t i = 0; i < batch.size(); ++i) {
        clamp_strings(batch[i]);
        const size_t before = bytes.size();
        try {
          // A collector of an older version reads no layout: the event is left out, not an error.
          if (speaks(Message(batch[i]), version)) encode_into(Message(batch[i]), bytes, version);
        } catch (const std::exception& e) {
          bytes.resize(before);
          dropped.fetch_add(1, std::memory_order_relaxed);
          set_error(fmt::format("event seq {} could not be encoded: {}", batch[i].seq, e.what()));
        }
        ends.push_back(bytes.size());
        ++run_events;
        if (bytes.size() - run_bytes >= kSealBytes) seal_run();
      }
      if (run_events > 0) seal_run();
      size_t written = 0;
      std::string why;
      const bool ok = alive() && write_all(bytes, Clock::now() + kWriteTimeout, written, why);
      if (ok) {
        sent.fetch_add(batch.size(), std::memory_order_relaxed);
        last_write = last_check = Clock::now();
        // Let more gather unless a full batch is already waiting.
        if (batch.size() < o.batch_max && !closing_flag.load()) wait_or_closing(o.flush_interval);
        continue;
      }
      // Events whose run the kernel took whole, BATCH_MAC included, count as sent; the rest go
      // back to the front, in order.
      size_t done = 0;
      while (done < batch.size() && ends[done] <= written) ++done;
      sent.fetch_add(done, std::memory_order_relaxed);
      for (size_t i = batch.size(); i-- > done;) retry.push_front(std::move(batch[i]));
      err = why.empty() ? fmt::format("collector {} closed the connection", where)
                        : fmt::format("writing to collector {} failed: {}", where, why);
      return false;
    }
  }

  // After the last event: half-close and wait (bounded by close()'s deadline) for the collector
  // to close its side, which it does once it has read everything.
  void finish_connection() {
    error_code ignored;
    socket.shutdown(tcp::socket::shutdown_send, ignored);
    run_op(
        [this](const std::shared_ptr<OpState>& s) {
          s->buffer.resize(256);
          socket.async_read_some(asio::buffer(s->buffer), [s](const error_code& ec, size_t) {
            s->ec = ec ? ec : error_code();
          });
        },
        deadline_of_close(), [this] { close_socket(); });
    close_socket();
  }

  size_t unsent() const {
    return queue->size() + retry.size();
  }

  bool should_exit() {
    return closing_flag.load() && (unsent() == 0 || Clock::now() >= deadline_of_close());
  }

  void run() {
    auto backoff = o.backoff_min;
    while (!should_exit()) {
      std::string err;
      if (connect_and_handshake(err)) {
        backoff = o.backoff_min;
        if (stream(err)) {
          finish_connection();
          break;
        }
        close_socket();
      }
      if (!err.empty()) set_error(err);
      {
        // Back off, but a close() arriving meanwhile bounds the wait by its own deadline.
        std::unique_lock lock(m);
        const auto backoff_end = Clock::now() + backoff;
        while (true) {
          auto until = backoff_end;
          if (closing) {
            if (unsent() == 0) break;
            until = std::min(until, deadline_of_close());
          }
          if (Clock::now() >= until) break;
          cv.wait_until(lock, until);
        }
      }
      backoff = std::min(backoff * 2, o.backoff_max);
    }
    const size_t left = unsent();
    std::lock_guard lock(m);
    if (left > 0) last_error = fmt::format("closed with {} events not sent to {}", left, where);
  }
};

Publisher::Publisher(PublisherOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.o = std::move(options);
  SL_ENFORCE(d.o.port != 0, "publisher: port must be 1..65535, got 0");
  SL_ENFORCE(d.o.queue_capacity > 0, "publisher: queue capacity must be > 0");
  SL_ENFORCE(d.o.flush_interval.count() > 0, "publisher: flush interval must be > 0 ms");
  d.queue = std::make_unique<telemetry::BoundedQueue<telemetry::Event>>(d.o.queue_capacity);
  SL_ENFORCE(d.o.batch_max > 0, "publisher: batch_max must be > 0");
  SL_ENFORCE(d.o.heartbeat.count() > 0, "publisher: heartbeat must be > 0 ms");
  SL_ENFORCE(d.o.backoff_min.count() > 0 && d.o.backoff_max >= d.o.backoff_min,
             "publisher: back-off must satisfy 0 < min <= max, got {} and {} ms",
             d.o.backoff_min.count(), d.o.backoff_max.count());
  if (d.o.hello.host.empty()) {
    error_code ec;
    d.o.hello.host = asio::ip::host_name(ec);
    if (ec) d.o.hello.host = "unknown";
  }
  if (d.o.hello.pid == 0) d.o.hello.pid = static_cast<int64_t>(::getpid());
  clamp(d.o.hello.host);
  clamp(d.o.hello.job_id);
  d.where = d.o.host.find(':') != std::string::npos ? fmt::format("[{}]:{}", d.o.host, d.o.port)
                                                    : fmt::format("{}:{}", d.o.host, d.o.port);
  d.thread = std::thread([&d] {
    try {
      d.run();
    } catch (const std::exception& e) {
      d.set_error(fmt::format("publisher thread failed: {}", e.what()));
    } catch (...) {
      d.set_error("publisher thread failed");
    }
    d.connected = false;
  });
}

Publisher::~Publisher() {
  close();
}

void Publisher::publish(telemetry::Event event) noexcept {
  Impl& d = *impl_;
  if (d.closing_flag.load(std::memory_order_relaxed)) {
    d.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  event.rank = d.o.hello.rank;  // the collector insists on the HELLO's rank
  // The number is given on the publisher's thread, in the order sent: a dropped event gets none.
  if (d.queue->push(event))
    d.published.fetch_add(1, std::memory_order_relaxed);
  else
    d.dropped.fetch_add(1, std::memory_order_relaxed);
}

void Publisher::begin_close() {
  Impl& d = *impl_;
  {
    std::lock_guard lock(d.m);
    if (d.closing) return;
    d.closing = true;
    d.closing_flag = true;
    d.close_deadline = (Clock::now() + d.o.close_timeout).time_since_epoch().count();
  }
  d.cv.notify_all();
}

void Publisher::close() {
  Impl& d = *impl_;
  std::lock_guard guard(d.close_mutex);
  if (d.joined) return;
  begin_close();
  if (d.thread.joinable()) d.thread.join();
  d.joined = true;
}

uint64_t Publisher::published() const {
  return impl_->published.load();
}
uint64_t Publisher::sent() const {
  return impl_->sent.load();
}
uint64_t Publisher::dropped() const {
  return impl_->dropped.load();
}
bool Publisher::connected() const {
  return impl_->connected.load();
}
std::string Publisher::last_error() const {
  std::lock_guard lock(impl_->m);
  return impl_->last_error;
}

}  // namespace shardlab::net
