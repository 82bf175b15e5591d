// Publisher: the worker side of telemetry, a TelemetrySink that streams events to a collector
// over TCP from its own thread, so training never waits on the network.
//
// publish() stamps the HELLO's rank and pushes into a bounded lock-free queue
// (engine/telemetry/event_queue.h): no lock, no allocation and no system call on the caller's
// thread; when the queue is full the event is dropped and counted. The publisher's thread gives
// each event it takes the per-rank sequence number (0, 1, 2, ... heartbeats included, so what a
// collector receives has no gaps and dropped events have no number), encodes and sends it.
// The thread connects (the mutual handshake of net/handshake.h: a collector that cannot prove it
// holds the token gets no telemetry), then sends queued events in batches (one write of many
// frames, sealed by BATCH_MACs), a heartbeat after `heartbeat` without a write,
// and on a lost connection reconnects with exponential back-off (`backoff_min` doubling to
// `backoff_max`, reset after a successful handshake); events queued meanwhile wait (up to the
// queue's capacity). A collector that refuses the token or the version is retried with back-off
// too, and the reason is kept (last_error()). Closing flushes what is queued for at most
// `close_timeout`, then waits (within the same bound) for the collector to read the last byte.
//
// Delivery: a batch leaves the queue only while it is being written; events whose sealed run a
// failed write did not hand to the kernel whole go back to the front of the queue and are sent
// after reconnecting, and nothing is written to a connection the collector has already closed
// (checked before each write). So a collector that is stopped and restarted gets every event
// exactly once, in order. The protocol has no acknowledgements: frames still unread in a
// collector's socket buffer when it stops or dies, or written in the instant it closes, are lost
// (never duplicated).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/telemetry/sink.h"
#include "net/protocol.h"

namespace shardlab::net {

struct PublisherOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string token;  // the job's shared token (auth.h)
  Hello hello;        // rank, world, coordinates, job id; host and pid are filled in when
                      // empty (pid 0)
  size_t queue_capacity = 16384;  // events waiting to be sent (slots allocated up front)
  size_t batch_max = 512;         // events per write
  // How long events gather before a write that is not full: few large writes and few wake-ups
  // rather than one per event. Events reach the collector at most this late (plus the network);
  // the monitor and the web page refresh at 10 Hz. At 5 ms the demo job's telemetry overhead was
  // 8-10% on 2 cores, at 50 ms within noise (shardlab bench telemetry).
  std::chrono::milliseconds flush_interval{50};
  std::chrono::milliseconds heartbeat{1000};
  std::chrono::milliseconds backoff_min{50}, backoff_max{2000};
  std::chrono::milliseconds close_timeout{2000};
};

// "HOST:PORT" -> host and port; throws InvalidArgument naming `flag` and the text
// ("--telemetry: expected HOST:PORT ..."). allow_any_port accepts port 0 (a listener: any free
// port).
void parse_host_port(const std::string& text, std::string& host, uint16_t& port,
                     const std::string& flag = "--telemetry", bool allow_any_port = false);

class Publisher : public telemetry::TelemetrySink {
 public:
  explicit Publisher(PublisherOptions options);  // starts the thread
  ~Publisher() override;                         // close()
  void publish(telemetry::Event event) noexcept override;
  // Flushes (bounded by close_timeout) and stops the thread. Idempotent.
  void close();
  // Starts closing (the close_timeout deadline runs from now) without waiting, so that many
  // publishers can share one deadline; close() then waits for the thread. Idempotent.
  void begin_close();

  uint64_t published() const;  // accepted into the queue (heartbeats included)
  uint64_t sent() const;       // written whole to a collector's connection
  uint64_t dropped() const;    // queue full, or published after close()
  bool connected() const;      // handshake done and the connection not known to be lost
  // The most recent failure ("collector 127.0.0.1:7000 refused authentication (wrong token?):
  // ..."), kept after later successes; empty when there was none.
  std::string last_error() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardlab::net
