// Collector: the receiving side of telemetry, an Asio TCP server (one io_context on its own
// thread, async reads, per-connection state) that accepts many workers, authenticates them and
// hands every decoded message to its consumers (a RunModel, a RecordingWriter, the app).
//
// Per connection: HELLO (version checked) -> CHALLENGE -> AUTH (HMAC checked) -> AUTH_OK, then
// events. A wrong token, a wrong version, an oversized or malformed frame, or no HELLO/AUTH within
// the handshake timeout closes that connection with a logged reason ("connection 3 from
// 127.0.0.1:5123: bad magic 0x..."); every other connection carries on. Events of a connection
// must carry the rank its HELLO announced. Consumers see a connection's HELLO once it has
// authenticated, then its events. Before authentication a frame may be at most a HELLO's size.
//
// Failures: a rank that fails reports JOB_STATE failed itself; one that is killed or crashes
// cannot, its connection just ends (EOF or reset). So when an authenticated connection ends while
// its rank's latest JOB_STATE is neither finished nor failed, the consumers get
// on_connection_lost() (after the connection's last message), unless a newer connection of the
// same rank is already streaming (a publisher reconnecting before the old socket was seen to
// close) or the collector itself is stopping. A publisher that reconnects (same job, host and pid)
// keeps what its rank reported; a new process for the rank starts afresh. Nothing is sent on the
// wire: the protocol is unchanged.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/protocol.h"

namespace boost::asio {
class io_context;
}

namespace shardlab::net {

// An authenticated connection ended before its rank reported finishing (see the file comment).
struct ConnectionLost {
  Hello hello;         // the connection's HELLO (hello.rank is the rank)
  std::string reason;  // for the user: "connection closed before the rank finished (killed or
                       // crashed?)", or with the socket error or the collector's own reason
  double time = 0;     // when the collector saw it end, epoch seconds (this machine's clock)
  // The JOB_STATE failed event that stands for it in a RunModel or a recording: the rank, seq
  // kCollectorSeq (protocol.h), `time` and `reason`. RunModel::add() recognises it.
  telemetry::Event event() const;
};

// Receives messages on the collector's thread, in arrival order per connection.
class MessageConsumer {
 public:
  virtual ~MessageConsumer() = default;
  virtual void on_message(const Message& message) = 0;
  // A rank's connection ended before it finished (see the file comment). Not a message: by
  // default nothing happens; a consumer that tracks ranks overrides it (RunModelConsumer,
  // RecordingConsumer).
  virtual void on_connection_lost(const ConnectionLost& lost) { (void)lost; }
};

struct CollectorOptions {
  std::string address = "127.0.0.1";  // listen address (loopback unless the user asks)
  uint16_t port = 0;                  // 0: any free port (see Collector::port())
  std::string token;
  uint32_t max_payload = kDefaultMaxPayload;
  std::chrono::milliseconds handshake_timeout{5000};
  // At most this many connections at once (workers included: a job of more ranks needs more);
  // more are refused at accept.
  size_t max_connections = 8192;
  // At most this many connections still in their handshake: a new one beyond it closes the oldest
  // of them, so peers that never authenticate cannot hold the collector's memory (each costs at
  // most a HELLO's bytes, see collector.cpp) nor keep a worker out.
  size_t max_unauthenticated = 64;
  // Called (on the collector thread) with one line per closed or refused connection (a clean
  // close by the worker included: "...: closed by the peer after 812 messages").
  std::function<void(const std::string&)> log;
};

struct CollectorStats {
  uint64_t accepted = 0;            // connections accepted
  uint64_t authenticated = 0;       // passed the handshake
  uint64_t rejected = 0;            // closed for a protocol or auth error
  uint64_t messages = 0;            // messages handed to consumers
  uint64_t lost = 0;                // connections that ended before their rank finished
                                    // (on_connection_lost calls)
  uint64_t open = 0;                // connections open now (handshaking or streaming)
  uint64_t dropped_handshakes = 0;  // closed to make room (max_unauthenticated; in rejected too)
};

class Collector {
 public:
  // Binds and listens at once (throws IoError naming the address when it cannot); serving starts
  // with start().
  Collector(CollectorOptions options, std::vector<MessageConsumer*> consumers);
  ~Collector();  // stop()
  uint16_t port() const;
  // Runs the io_context on a new thread.
  void start();
  // Closes every connection and the listener and joins the thread. Idempotent.
  void stop();
  CollectorStats stats() const;
  // The job has ended (its launcher exited): names the hosts whose ranks never said they ended
  // while every other host's did (net/host_watch.h), as the once-a-second check does for a host
  // silent for 10 s. Call before stop().
  void settle_hosts();
  // LostHost::line() of each host found lost so far, in order ("host h2 (ranks 2, 3) lost at
  // step 321: no answer for 10 s"). Thread-safe.
  std::vector<std::string> lost_hosts() const;
  // Runs `f` on the collector thread and waits for it (to read consumers safely); throws
  // TimeoutError when it has not run within 10 s. Before start(), after stop() or on the
  // collector thread itself, `f` runs at once on the calling thread.
  void call(const std::function<void()>& f);
  // The io_context the collector serves on, for other servers that read its consumers on the
  // same thread without locks (net/web/web_server.h). Valid for the collector's lifetime.
  boost::asio::io_context& io_context();
  // Runs `hook` on the collector thread when stop() begins, after its own connections are closed
  // (a server sharing the io_context closes its sockets there, so the thread can end).
  void on_stop(std::function<void()> hook);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardlab::net
