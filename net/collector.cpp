// The collector: one io_context on one thread, so connection state needs no locks; only the
// statistics (read from other threads) are atomic.
#include "net/collector.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <exception>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility> (GCC 12, C++20).
#include <utility>

#include <boost/asio.hpp>

#include "engine/core/error.h"
#include "net/auth.h"
#include "net/handshake.h"
#include "net/host_watch.h"
#include "net/listener.h"

namespace shardlab::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {

// How long stop() lets the io_context wind down on its own before stopping it outright.
constexpr auto kStopGrace = std::chrono::seconds(5);
// How long call() waits for the collector thread to run the function.
constexpr auto kCallTimeout = std::chrono::seconds(10);
// Bytes asked for per read once a connection streams; a frame larger than this simply takes
// several reads.
constexpr size_t kReadChunk = 16 * 1024;
// Before authentication a frame can be at most a HELLO or an AUTH: a HELLO's job id and host name
// fit in this (kMaxHelloString each), so an unauthenticated peer costs the collector at most this
// much buffered input, and reads go into a buffer of this size until the peer has authenticated.
constexpr uint32_t kMaxHandshakePayload = 2 * kMaxHelloString + 256;
constexpr size_t kHandshakeChunk = kMaxHandshakePayload + kHeaderSize;

std::string endpoint_text(const tcp::endpoint& ep) {
  const auto addr = ep.address();
  if (addr.is_v6()) return fmt::format("[{}]:{}", addr.to_string(), ep.port());
  return fmt::format("{}:{}", addr.to_string(), ep.port());
}

const char* message_name(const Message& m) {
  switch (m.index()) {
    case 0:
      return "HELLO";
    case 1:
      return "CHALLENGE";
    case 2:
      return "AUTH";
    case 3:
      return "AUTH_OK";
    case 4:
      return "BATCH_MAC";
    default:
      return "an event";
  }
}

// What is wrong with a HELLO's coordinates ("" nothing): rank within [0, world), world within
// [1, kMaxWorld], each of pp, tp, dp within [1, world] and each coordinate within its dimension.
std::string hello_problem(const Hello& h) {
  if (h.world < 1 || h.world > kMaxWorld)
    return fmt::format("world size {} is outside [1, {}]", h.world, kMaxWorld);
  if (h.rank < 0 || h.rank >= h.world)
    return fmt::format("rank {} is outside [0, {})", h.rank, h.world);
  if (h.pp < 1 || h.tp < 1 || h.dp < 1 || h.pp > h.world || h.tp > h.world || h.dp > h.world)
    return fmt::format("pp {} x tp {} x dp {} does not fit the world size {}", h.pp, h.tp, h.dp,
                       h.world);
  if (h.pp_i < 0 || h.pp_i >= h.pp || h.tp_i < 0 || h.tp_i >= h.tp || h.dp_i < 0 || h.dp_i >= h.dp)
    return fmt::format("coordinates pp{} tp{} dp{} are outside pp {} x tp {} x dp {}", h.pp_i,
                       h.tp_i, h.dp_i, h.pp, h.tp, h.dp);
  if (h.job_id.size() > kMaxHelloString || h.host.size() > kMaxHelloString)
    return fmt::format("job id or host longer than {} bytes", kMaxHelloString);
  return {};
}

}  // namespace

namespace {

struct Core;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Core& owner, uint64_t id, tcp::socket socket, std::string peer)
      : owner_(owner),
        id_(id),
        socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        peer_(std::move(peer)) {}

  void start();
  // Closes the socket and forgets the connection; `reason` empty: no log line. An authenticated
  // connection tells the consumers its rank's connection was lost (Core::closed) with `lost` as
  // the reason ("": one made from `reason`).
  void close(const std::string& reason, bool rejected, const std::string& lost = {});
  uint64_t id() const { return id_; }
  bool authenticated() const { return state_ == State::streaming; }

 private:
  enum class State { await_hello, await_auth, streaming };

  void read_more();
  void on_read(const error_code& ec, size_t n);
  // `frame`: the message's bytes as received (the handshake and the batch MACs cover them).
  void handle(Message&& message, std::span<const uint8_t> frame);
  void on_event(Message&& message, std::span<const uint8_t> frame);
  void on_batch_mac(const BatchMac& mac);
  // Encodes in the version chosen for this connection (its CHALLENGE's): a worker of an older
  // version reads every frame we write.
  void send(const Message& message);
  uint16_t version_ = kProtocolVersion;
  void write_next();

  Core& owner_;
  uint64_t id_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  std::string peer_;
  State state_ = State::await_hello;
  bool closed_ = false;
  Hello hello_;
  std::optional<CollectorHandshake> handshake_;
  std::optional<BatchVerifier> verifier_;  // once streaming
  std::vector<Message> unsealed_;          // events waiting for their BATCH_MAC
  std::vector<uint8_t> chunk_ = std::vector<uint8_t>(kHandshakeChunk);  // what one read fills:
                                                                        // small until it streams
  std::vector<uint8_t> rbuf_;  // the start of a frame whose rest has not arrived yet
  std::deque<std::vector<uint8_t>> wqueue_;
  bool writing_ = false;
  uint64_t messages_ = 0;
};

}  // namespace

namespace {

struct Core {
  CollectorOptions options;
  std::vector<MessageConsumer*> consumers;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  uint16_t port = 0;
  std::string where;  // "address:port", for messages
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  asio::steady_timer retry_timer{io};  // accept() after a failed accept
  std::thread thread;
  std::atomic<std::thread::id> loop_thread{};  // the collector thread while it runs
  std::promise<void> finished;                 // set when the thread's run() returns
  std::mutex lifecycle;                        // start() / stop() / call()
  bool started = false, stopped = false;
  bool stopping = false;                                        // collector thread only
  uint64_t next_id = 1;                                         // collector thread only
  std::map<uint64_t, std::shared_ptr<Connection>> connections;  // collector thread only
  std::atomic<uint64_t> open_connections{0};
  size_t handshaking = 0;  // connections not yet authenticated (collector thread only)
  std::vector<std::function<void()>> stop_hooks;  // collector thread, or before start()
  std::atomic<uint64_t> accepted{0}, authenticated{0}, rejected{0}, messages{0}, lost{0},
      dropped_handshakes{0};

  // What the collector knows of a rank across its connections (collector thread only): its latest
  // authenticated connection, the HELLO that opened it, and whether its latest JOB_STATE was final.
  struct RankLink {
    uint64_t connection = 0;
    Hello hello;
    bool done = false;
  };
  std::map<int, RankLink> ranks;
  // Lost hosts (net/host_watch.h): fed below, asked once a second by host_timer.
  HostWatch watch;
  asio::steady_timer host_timer{io};
  mutable std::mutex lost_mutex;
  std::vector<std::string> lost_lines;  // LostHost::line() of each host lost (lost_mutex)

  void log(const std::string& line) {
    if (!options.log) return;
    try {
      options.log(line);
    } catch (...) {
      // A failing log callback must not take the collector down.
    }
  }

  void dispatch(const Message& message) {
    messages.fetch_add(1, std::memory_order_relaxed);
    for (MessageConsumer* c : consumers) {
      try {
        c->on_message(message);
      } catch (const std::exception& e) {
        log(fmt::format("collector: a consumer failed: {}", e.what()));
      }
    }
  }

  // Connection `id` of `hello.rank` has authenticated. The same process reconnecting keeps what
  // its rank reported; a new process for the rank (another job, host or pid) starts afresh.
  void streaming(uint64_t id, const Hello& hello) {
    RankLink& link = ranks[hello.rank];
    if (link.connection == 0 || link.hello.job_id != hello.job_id ||
        link.hello.host != hello.host || link.hello.pid != hello.pid)
      link.done = false;
    link.connection = id;
    link.hello = hello;
    watch.hello(hello.rank, hello.host, telemetry::now_seconds());
  }

  void job_state(int rank, telemetry::JobState state) {
    ranks[rank].done =
        state == telemetry::JobState::finished || state == telemetry::JobState::failed;
    if (ranks[rank].done) watch.ended(rank, telemetry::now_seconds());
  }

  // Each rank of a lost host fails with the host's line (its connection closed, so a reconnect
  // after a restored link starts it afresh); `shardlab run` reads the lines (lost_hosts()).
  void report_lost(const std::vector<LostHost>& lost);
  // Asks the watch once a second until the collector stops.
  void watch_hosts() {
    host_timer.expires_after(std::chrono::seconds(1));
    host_timer.async_wait([this](const error_code& ec) {
      if (ec || stopping) return;
      report_lost(watch.check(telemetry::now_seconds()));
      watch_hosts();
    });
  }

  // Whether the end of authenticated connection `id` of `rank` loses the rank: not when it
  // reported a final state, a newer connection of the rank is streaming, or the collector is
  // stopping.
  bool loses_rank(uint64_t id, int rank) const {
    if (stopping) return false;
    const auto it = ranks.find(rank);
    return it != ranks.end() && it->second.connection == id && !it->second.done;
  }

  // Tells the consumers that `hello.rank`'s connection was lost.
  void lost_rank(const Hello& hello, const std::string& reason) {
    lost.fetch_add(1, std::memory_order_relaxed);
    watch.ended(hello.rank, telemetry::now_seconds());
    ConnectionLost what;
    what.hello = hello;
    what.reason = reason;
    what.time = telemetry::now_seconds();
    for (MessageConsumer* c : consumers) {
      try {
        c->on_connection_lost(what);
      } catch (const std::exception& e) {
        log(fmt::format("collector: a consumer failed: {}", e.what()));
      }
    }
  }

  void drop_oldest_handshake() {
    for (auto& [id, conn] : connections)
      if (!conn->authenticated()) {
        if (dropped_handshakes.fetch_add(1, std::memory_order_relaxed) == 0)
          log(
              fmt::format("collector on {}: over {} connections in their handshake; dropping the "
                          "oldest as new ones come (a flood of peers that do not authenticate?)",
                          where, options.max_unauthenticated));
        auto victim = conn;  // close() erases it from the map; no line per connection
        victim->close("", true);
        return;
      }
  }

  void accept() {
    acceptor.async_accept([this](const error_code& ec, tcp::socket socket) {
      if (stopping || ec == asio::error::operation_aborted) return;
      if (ec) {
        // Out of descriptors and the like: pause before accepting again instead of spinning.
        log(fmt::format("collector on {}: accept failed: {}", where, ec.message()));
        retry_timer.expires_after(std::chrono::milliseconds(100));
        retry_timer.async_wait([this](const error_code& e) {
          if (!e && !stopping) accept();
        });
        return;
      } else {
        accepted.fetch_add(1, std::memory_order_relaxed);
        error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        const auto remote = socket.remote_endpoint(ignored);
        const std::string peer = ignored ? std::string("?") : endpoint_text(remote);
        if (connections.size() >= options.max_connections) {
          // Every slot taken (by workers, since unauthenticated ones are capped lower): refuse.
          rejected.fetch_add(1, std::memory_order_relaxed);
          log(
              fmt::format("collector on {}: refused a connection from {}: {} connections open "
                          "(the limit)",
                          where, peer, connections.size()));
          socket.close(ignored);
          accept();
          return;
        }
        // Unauthenticated connections are capped: the oldest one still in its handshake goes,
        // so a flood of peers that never authenticate cannot keep a worker out (a worker's
        // handshake takes one round trip; the flood's connections wait out their deadline).
        if (handshaking >= options.max_unauthenticated) drop_oldest_handshake();
        const uint64_t id = next_id++;
        auto conn = std::make_shared<Connection>(*this, id, std::move(socket), peer);
        connections.emplace(id, conn);
        ++handshaking;
        open_connections.store(connections.size(), std::memory_order_relaxed);
        conn->start();
      }
      accept();
    });
  }

  void shutdown_all() {
    stopping = true;
    error_code ignored;
    acceptor.close(ignored);
    retry_timer.cancel();
    host_timer.cancel();
    auto all = std::move(connections);
    connections.clear();
    open_connections.store(0, std::memory_order_relaxed);
    for (auto& [id, conn] : all) conn->close("", false);
    for (auto& hook : stop_hooks) {
      try {
        hook();
      } catch (const std::exception& e) {
        log(fmt::format("collector on {}: a stop hook failed: {}", where, e.what()));
      }
    }
    stop_hooks.clear();
    work.reset();
  }
};

}  // namespace

namespace {

void Connection::start() {
  auto self = shared_from_this();
  timer_.expires_after(owner_.options.handshake_timeout);
  timer_.async_wait([self](const error_code& ec) {
    if (ec || self->closed_ || self->state_ == State::streaming) return;
    self->close(
        fmt::format("no {} within {} ms", self->state_ == State::await_hello ? "HELLO" : "AUTH",
                    self->owner_.options.handshake_timeout.count()),
        true);
  });
  read_more();
}

void Connection::close(const std::string& reason, bool rejected, const std::string& lost) {
  if (closed_) return;
  closed_ = true;
  const bool lost_rank = state_ == State::streaming && owner_.loses_rank(id_, hello_.rank);
  if (!reason.empty())
    owner_.log(fmt::format(
        "connection {} from {}: {}{}", id_, peer_, reason,
        lost_rank ? fmt::format(" before rank {} finished", hello_.rank) : std::string()));
  if (rejected) owner_.rejected.fetch_add(1, std::memory_order_relaxed);
  timer_.cancel();
  error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  if (state_ != State::streaming && owner_.handshaking > 0) --owner_.handshaking;
  owner_.connections.erase(id_);  // pending handlers keep the object alive until they run
  owner_.open_connections.store(owner_.connections.size(), std::memory_order_relaxed);
  if (lost_rank)
    owner_.lost_rank(hello_, !lost.empty()
                                 ? lost
                                 : fmt::format("the collector closed the rank's connection before "
                                               "it finished: {}",
                                               reason.empty() ? "no reason given" : reason));
}

void Connection::read_more() {
  socket_.async_read_some(
      asio::buffer(chunk_.data(), chunk_.size()),
      [self = shared_from_this()](const error_code& ec, size_t n) { self->on_read(ec, n); });
}

void Connection::on_read(const error_code& ec, size_t n) {
  if (closed_) return;
  if (ec) {
    if (state_ == State::await_auth && ec != asio::error::operation_aborted) {
      // A worker leaves here when this collector's proof did not check: it holds another token.
      close(fmt::format("rank {} left instead of answering the CHALLENGE: it did not accept this "
                        "collector's proof of the token (does it hold a different token?)",
                        hello_.rank),
            true);
    } else if (ec == asio::error::eof) {
      // A clean end: a publisher closing after its last event, or the kernel closing the socket
      // of a process that was killed or crashed (which of the two, only its JOB_STATE tells).
      close(fmt::format("closed by the peer after {} messages", messages_), false,
            "connection closed before the rank finished (killed or crashed?)");
    } else if (ec != asio::error::operation_aborted) {
      close(fmt::format("read failed: {}", ec.message()), false,
            fmt::format("connection lost before the rank finished: {} (killed, crashed or a "
                        "network failure?)",
                        ec.message()));
    }
    return;
  }
  // Decode straight from the chunk when nothing is pending (the common case); keep only the
  // incomplete tail of a frame in rbuf_.
  std::span<const uint8_t> bytes(chunk_.data(), n);
  if (!rbuf_.empty()) {
    rbuf_.insert(rbuf_.end(), chunk_.data(), chunk_.data() + n);
    bytes = std::span<const uint8_t>(rbuf_.data(), rbuf_.size());
  }
  size_t begin = 0;
  while (!closed_) {
    const uint32_t limit = state_ == State::streaming
                               ? owner_.options.max_payload
                               : std::min(owner_.options.max_payload, kMaxHandshakePayload);
    DecodeResult r = decode_frame(bytes.subspan(begin), limit);
    if (r.status == DecodeResult::Status::need_more) break;
    if (r.status == DecodeResult::Status::error) {
      close(r.error, true);
      return;
    }
    const auto frame = bytes.subspan(begin, r.consumed);
    begin += r.consumed;
    handle(std::move(r.message), frame);
  }
  if (closed_) return;
  if (rbuf_.empty()) {
    rbuf_.assign(bytes.begin() + static_cast<std::ptrdiff_t>(begin), bytes.end());
  } else {
    rbuf_.erase(rbuf_.begin(), rbuf_.begin() + static_cast<std::ptrdiff_t>(begin));
  }
  if (state_ == State::streaming && chunk_.size() < kReadChunk) chunk_.resize(kReadChunk);
  read_more();
}

void Connection::handle(Message&& message, std::span<const uint8_t> frame) {
  switch (state_) {
    case State::await_hello: {
      auto* hello = std::get_if<Hello>(&message);
      if (!hello) {
        close(fmt::format("expected HELLO, got {}", message_name(message)), true);
        return;
      }
      if (const std::string bad = hello_problem(*hello); !bad.empty()) {
        close("HELLO " + bad, true);
        return;
      }
      handshake_.emplace(owner_.options.token);
      std::string problem;
      Challenge challenge;
      try {
        challenge = handshake_->challenge(*hello, frame, problem);
      } catch (const std::exception& e) {  // the OS's random source failed: no challenge
        close(fmt::format("cannot make a challenge: {}", e.what()), true);
        return;
      }
      if (!problem.empty()) {
        close(problem, true);
        return;
      }
      hello_ = std::move(*hello);
      version_ = challenge.version;  // every frame this collector writes to it from now on
      send(challenge);
      state_ = State::await_auth;
      return;
    }
    case State::await_auth: {
      auto* auth = std::get_if<Auth>(&message);
      if (!auth) {
        close(fmt::format("expected AUTH, got {}", message_name(message)), true);
        return;
      }
      if (!handshake_->check(*auth)) {
        close(fmt::format("authentication failed for rank {} (wrong token, or an answer made for "
                          "another connection)",
                          hello_.rank),
              true);
        return;
      }
      timer_.cancel();
      state_ = State::streaming;
      verifier_.emplace(handshake_->session_key());
      handshake_.reset();
      if (owner_.handshaking > 0) --owner_.handshaking;
      send(AuthOk{});
      owner_.authenticated.fetch_add(1, std::memory_order_relaxed);
      owner_.streaming(id_, hello_);
      ++messages_;
      owner_.dispatch(Message(hello_));  // recordings need the rank's coordinates
      return;
    }
    case State::streaming: {
      if (const auto* mac = std::get_if<BatchMac>(&message)) {
        on_batch_mac(*mac);
        return;
      }
      on_event(std::move(message), frame);
      return;
    }
  }
}

// An event is checked for what it claims at once, and held until its batch's MAC checks.
void Connection::on_event(Message&& message, std::span<const uint8_t> frame) {
  auto* event = std::get_if<telemetry::Event>(&message);
  if (!event) {
    close(fmt::format("unexpected {} after the handshake", message_name(message)), true);
    return;
  }
  if (event->rank != hello_.rank) {
    close(fmt::format("event for rank {} on the connection of rank {}", event->rank, hello_.rank),
          true);
    return;
  }
  if (event->seq == kCollectorSeq) {  // reserved for the collector's own lost-connection events
    close(fmt::format("event with the reserved sequence number {}", kCollectorSeq), true);
    return;
  }
  verifier_->add(frame);
  if (verifier_->unsealed_bytes() > max_unsealed_bytes(owner_.options.max_payload)) {
    close(fmt::format("{} bytes of events without a BATCH_MAC (a worker seals every {} bytes)",
                      verifier_->unsealed_bytes(), kSealBytes),
          true);
    return;
  }
  unsealed_.push_back(std::move(message));
}

void Connection::on_batch_mac(const BatchMac& mac) {
  const uint64_t batch = verifier_->batches();
  if (!verifier_->check(mac)) {
    close(fmt::format("batch {} of rank {} failed its integrity check ({} events discarded): the "
                      "stream was altered on the way, or its sender does not hold the session key",
                      batch, hello_.rank, unsealed_.size()),
          true);
    return;
  }
  const double now = telemetry::now_seconds();
  for (Message& m : unsealed_) {
    const auto& event = std::get<telemetry::Event>(m);
    const auto* step = std::get_if<telemetry::StepEvent>(&event.payload);
    owner_.watch.heard(hello_.rank, now, step ? step->step : -1);
    if (const auto* s = std::get_if<telemetry::JobStateEvent>(&event.payload))
      owner_.job_state(hello_.rank, s->state);
    ++messages_;
    owner_.dispatch(m);
    if (closed_) break;
  }
  unsealed_.clear();
}

void Connection::send(const Message& message) {
  wqueue_.push_back(encode(message, version_));
  if (!writing_) write_next();
}

// One write in flight; the rest wait in the queue.
void Connection::write_next() {
  if (wqueue_.empty() || closed_) {
    writing_ = false;
    return;
  }
  writing_ = true;
  asio::async_write(socket_, asio::buffer(wqueue_.front()),
                    [self = shared_from_this()](const error_code& ec, size_t) {
                      if (self->closed_) return;
                      if (ec) {
                        self->close(
                            fmt::format("write failed: {}", ec.message()), false,
                            fmt::format("connection lost before the rank finished: {} (killed, "
                                        "crashed or a network failure?)",
                                        ec.message()));
                        return;
                      }
                      self->wqueue_.pop_front();
                      self->write_next();
                    });
}

}  // namespace

void Core::report_lost(const std::vector<LostHost>& lost) {
  for (const LostHost& host : lost) {
    const std::string line = host.line();
    {
      std::lock_guard g(lost_mutex);
      lost_lines.push_back(line);
    }
    log(fmt::format("collector on {}: {}", where, line));
    for (int rank : host.ranks) {
      const auto link = ranks.find(rank);
      if (link == ranks.end()) continue;
      const auto conn = connections.find(link->second.connection);
      if (conn != connections.end()) {
        auto victim = conn->second;  // close() erases it from the map
        victim->close("", false, line);
      } else if (!link->second.done) {
        lost_rank(link->second.hello, line);
      }
      link->second.done = true;
    }
  }
}

telemetry::Event ConnectionLost::event() const {
  telemetry::Event e;
  e.rank = hello.rank;
  e.seq = kCollectorSeq;
  e.time = time;
  e.payload = telemetry::JobStateEvent{telemetry::JobState::failed, reason};
  return e;
}

struct Collector::Impl : Core {};

Collector::Collector(CollectorOptions options, std::vector<MessageConsumer*> consumers)
    : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.options = std::move(options);
  d.consumers = std::move(consumers);
  SL_ENFORCE(d.options.handshake_timeout.count() > 0,
             "collector: handshake timeout must be > 0 ms, got {}",
             d.options.handshake_timeout.count());
  const tcp::endpoint bound = listen_on(d.acceptor, d.options.address, d.options.port, "collector");
  d.port = bound.port();
  d.where = endpoint_text(bound);
}

Collector::~Collector() {
  try {
    stop();
  } catch (...) {
  }
}

uint16_t Collector::port() const {
  return impl_->port;
}

void Collector::start() {
  Impl& d = *impl_;
  std::lock_guard lock(d.lifecycle);
  SL_ENFORCE(!d.stopped, "collector on {}: start() after stop()", d.where);
  if (d.started) return;
  d.started = true;
  asio::post(d.io, [&d] {
    d.accept();
    d.watch_hosts();
  });
  d.thread = std::thread([&d] {
    d.loop_thread = std::this_thread::get_id();
    for (;;) {
      try {
        d.io.run();
        break;
      } catch (const std::exception& e) {
        d.log(fmt::format("collector on {}: {}", d.where, e.what()));
      } catch (...) {
        d.log(fmt::format("collector on {}: unknown error", d.where));
      }
    }
    d.finished.set_value();
  });
}

void Collector::stop() {
  Impl& d = *impl_;
  std::lock_guard lock(d.lifecycle);
  if (d.stopped) return;
  d.stopped = true;
  if (d.thread.joinable()) {
    asio::post(d.io, [&d] { d.shutdown_all(); });
    // Pending handlers see their sockets closed and finish; then run() returns by itself.
    if (d.finished.get_future().wait_for(kStopGrace) != std::future_status::ready) d.io.stop();
    d.thread.join();
  } else {
    error_code ignored;
    d.acceptor.close(ignored);
  }
}

CollectorStats Collector::stats() const {
  const Impl& d = *impl_;
  CollectorStats s;
  s.accepted = d.accepted.load();
  s.authenticated = d.authenticated.load();
  s.rejected = d.rejected.load();
  s.messages = d.messages.load();
  s.lost = d.lost.load();
  s.open = d.open_connections.load();
  s.dropped_handshakes = d.dropped_handshakes.load();
  return s;
}

void Collector::settle_hosts() {
  call([&] { impl_->report_lost(impl_->watch.settle(telemetry::now_seconds())); });
}

std::vector<std::string> Collector::lost_hosts() const {
  std::lock_guard g(impl_->lost_mutex);
  return impl_->lost_lines;
}

asio::io_context& Collector::io_context() {
  return impl_->io;
}

void Collector::on_stop(std::function<void()> hook) {
  call([&] { impl_->stop_hooks.push_back(std::move(hook)); });
}

void Collector::call(const std::function<void()>& f) {
  Impl& d = *impl_;
  if (std::this_thread::get_id() == d.loop_thread.load()) {
    f();  // already on the collector thread (a consumer calling back)
    return;
  }
  std::unique_lock lock(d.lifecycle);
  // Not serving: nothing else touches the consumers.
  if (!d.started || d.stopped) {
    lock.unlock();
    f();
    return;
  }
  // `f` refers to the caller's frame: once this call gives up waiting, the posted task must not
  // run it any more. A task that has already started is waited for (it is running; it ends).
  struct State {
    std::mutex m;
    bool cancelled = false, started = false;
  };
  auto state = std::make_shared<State>();
  auto task = std::make_shared<std::packaged_task<void()>>([state, &f] {
    {
      std::lock_guard g(state->m);
      if (state->cancelled) return;
      state->started = true;
    }
    f();
  });
  auto done = task->get_future();
  asio::post(d.io, [task] { (*task)(); });
  lock.unlock();
  if (done.wait_for(kCallTimeout) != std::future_status::ready) {
    bool started = false;
    {
      std::lock_guard g(state->m);
      started = state->started;
      if (!started) state->cancelled = true;
    }
    if (!started)
      SL_THROW(TimeoutError, "collector on {}: call() did not run within {} s", d.where,
               std::chrono::duration_cast<std::chrono::seconds>(kCallTimeout).count());
    done.wait();
  }
  done.get();
}

}  // namespace shardlab::net
