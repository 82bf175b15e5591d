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
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/protocol.h"

namespace shardlab::net {

// Receives messages on the collector's thread, in arrival order per connection.
class MessageConsumer {
 public:
  virtual ~MessageConsumer() = default;
  virtual void on_message(const Message& message) = 0;
};

struct CollectorOptions {
  std::string address = "127.0.0.1";  // listen address (loopback unless the user asks)
  uint16_t port = 0;                  // 0: any free port (see Collector::port())
  std::string token;
  uint32_t max_payload = kDefaultMaxPayload;
  std::chrono::milliseconds handshake_timeout{5000};
  // Called (on the collector thread) with one line per closed or refused connection (a clean
  // close by the worker included: "...: closed by the peer after 812 messages").
  std::function<void(const std::string&)> log;
};

struct CollectorStats {
  uint64_t accepted = 0;       // connections accepted
  uint64_t authenticated = 0;  // passed the handshake
  uint64_t rejected = 0;       // closed for a protocol or auth error
  uint64_t messages = 0;       // messages handed to consumers
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
  // Runs `f` on the collector thread and waits for it (to read consumers safely); throws
  // TimeoutError when it has not run within 10 s. Before start(), after stop() or on the
  // collector thread itself, `f` runs at once on the calling thread.
  void call(const std::function<void()>& f);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardlab::net
